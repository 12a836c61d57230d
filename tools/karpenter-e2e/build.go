package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// The pinned module (its own go.mod, outside go.work: the suites' Kubernetes libraries are newer
// than Fleetwright's) and the two Karpenter modules it requires.
const (
	pinDir       = "tools/karpenter-e2e/suites"
	coreModule   = "sigs.k8s.io/karpenter"
	awsModule    = "github.com/aws/karpenter-provider-aws"
	vpcModule    = "github.com/aws/amazon-vpc-resource-controller-k8s" // the provider suite cleans its SecurityGroupPolicies
	checksumSkip = "k8s.io/kubernetes,k8s.io/controller-manager"       // as the Makefile's GONOSUMDB
)

// goEnv is the environment every go command of the pinned module runs with: no workspace, the
// module's go.sum as it is, and the Makefile's GONOSUMDB.
func goEnv() []string {
	return append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "GONOSUMDB="+checksumSkip)
}

// buildSuites compiles each suite's test binary from the pinned module with `go test -c` into a
// cache directory named after the module's go.sum, the Go version and the platform, and
// returns that directory. A directory already complete is reused: a warm run builds nothing.
func buildSuites(ctx context.Context, root string, out io.Writer) (string, error) {
	sum, err := os.ReadFile(filepath.Join(root, pinDir, "go.sum"))
	if err != nil {
		return "", fmt.Errorf("reading the pinned module: %w", err)
	}
	h := sha256.New()
	h.Write(sum)
	fmt.Fprintf(h, "%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the cache directory: %w", err)
	}
	dir := filepath.Join(cache, "fleetwright", "karpenter-e2e", hex.EncodeToString(h.Sum(nil))[:16])
	done := filepath.Join(dir, ".complete")
	if _, err := os.Stat(done); err == nil {
		fmt.Fprintf(out, "karpenter-e2e: suites already built in %s\n", dir)
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	var pkgs []string
	for _, s := range suites {
		pkgs = append(pkgs, s.pkg)
	}
	fmt.Fprintf(out, "karpenter-e2e: building %s (go test -c, from the module proxy on a cold cache: minutes)\n", strings.Join(pkgs, ", "))
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-c", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = filepath.Join(root, pinDir)
	cmd.Env = goEnv()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, io.MultiWriter(out, &stderr)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the suites: %w\n%s", err, stderr.String())
	}
	for _, s := range suites {
		if _, err := os.Stat(filepath.Join(dir, s.binary())); err != nil {
			return "", fmt.Errorf("go test -c made no %s: %w", s.binary(), err)
		}
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

// moduleDirs returns where the module cache holds the source of each module the shims take
// CRDs and manifests from, at the pinned module's versions (none of it is committed).
func moduleDirs(ctx context.Context, root string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", coreModule, awsModule, vpcModule)
	cmd.Dir = filepath.Join(root, pinDir)
	cmd.Env = goEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download: %w\n%s", err, stderr.String())
	}
	dirs := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var m struct{ Path, Version, Dir, Error string }
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go mod download's answer: %w", err)
		}
		if m.Error != "" || m.Dir == "" {
			return nil, fmt.Errorf("downloading %s: %s", m.Path, m.Error)
		}
		dirs[m.Path] = m.Dir
	}
	for _, m := range []string{coreModule, awsModule, vpcModule} {
		if dirs[m] == "" {
			return nil, fmt.Errorf("go mod download did not report %s", m)
		}
	}
	return dirs, nil
}
