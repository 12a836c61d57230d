package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// VersionVar is the variable -ldflags -X stamps the version into; every service reports it
// (--version, --help, fleetwright_build_info).
const VersionVar = "github.com/fleetwright/fleetwright/pkg/service.Version"

// platform is one OS/architecture an image is built for.
type platform struct{ OS, Arch string }

func (p platform) String() string { return p.OS + "/" + p.Arch }

// goArches are the architectures Go and the images both support here.
var goArches = []string{"amd64", "arm64"}

func parsePlatforms(list string) ([]platform, error) {
	var out []platform
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		os, arch, ok := strings.Cut(s, "/")
		if !ok || os != "linux" || !slices.Contains(goArches, arch) {
			return nil, fmt.Errorf("platform %q: want linux/amd64 or linux/arm64", s)
		}
		p := platform{os, arch}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform in %q", list)
	}
	return out, nil
}

// binaries are the compiled services, by platform and service name.
type binaries map[platform]map[string]string

// compile builds every service for every platform into work: one `go build` per platform, so
// the toolchain shares the packages the services have in common. The binaries are static
// (CGO_ENABLED=0), carry no local paths (-trimpath), and have the version stamped in. go
// build runs in the repository with the workspace, as `make build` does.
func compile(ctx context.Context, o options, work string) (binaries, error) {
	out := binaries{}
	pkgs := make([]string, 0, len(o.Services))
	for _, s := range o.Services {
		pkgs = append(pkgs, "./services/"+s)
	}
	for _, p := range o.Platforms {
		dir := filepath.Join(work, p.OS+"-"+p.Arch)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		args := append([]string{"build", "-trimpath", "-ldflags", "-s -w -buildid= -X " + VersionVar + "=" + o.Version, "-o", dir + "/"}, pkgs...)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = o.Root
		cmd.Env = append(buildEnv(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go build for %s: %w\n%s", p, err, stderr.String())
		}
		out[p] = map[string]string{}
		for _, s := range o.Services {
			out[p][s] = filepath.Join(dir, s)
		}
	}
	return out, nil
}

// buildEnv is the environment without what would change the build behind the flags' back: the
// workspace is the repository's (GOWORK unset, so a caller's GOWORK=off does not apply), and
// GOOS, GOARCH and CGO_ENABLED are set per platform.
func buildEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOWORK", "GOOS", "GOARCH", "CGO_ENABLED", "GOFLAGS":
			continue
		}
		env = append(env, kv)
	}
	if os.Getenv("GONOSUMDB") == "" {
		// The two modules whose checksum lookups fail (see the Makefile).
		env = append(env, "GONOSUMDB=k8s.io/kubernetes,k8s.io/controller-manager")
	}
	return env
}

// gitOutput runs git in dir and returns its trimmed output, or def when git fails.
func gitOutput(dir, def string, args ...string) string {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return def
	}
	return string(bytes.TrimSpace(out))
}

func parseUnix(s string) (int64, error) { return strconv.ParseInt(strings.TrimSpace(s), 10, 64) }
