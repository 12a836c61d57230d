package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// Versions of the control-plane parts. They must match the go.mod files under modules/.
const (
	KubernetesVersion = "v1.32.4"
	EtcdVersion       = "v3.5.17"
	KwokVersion       = "v0.7.0"
)

// Binary names, as found in the binary directory.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kubectl               = "kubectl"
	Kwok                  = "kwok"
)

// nosumdb lists exactly the modules whose checksum-database lookups fail through the proxy.
const nosumdb = "k8s.io/kubernetes,k8s.io/controller-manager"

type binary struct {
	name   string // file name in the binary directory
	module string // directory under modules/
	pkg    string // package to build
}

var binaries = []binary{
	{Etcd, "etcd", "go.etcd.io/etcd/server/v3"},
	{Kwok, "kwok", "sigs.k8s.io/kwok/cmd/kwok"},
	{KubeAPIServer, "kube", "k8s.io/kubernetes/cmd/kube-apiserver"},
	{KubeControllerManager, "kube", "k8s.io/kubernetes/cmd/kube-controller-manager"},
	{KubeScheduler, "kube", "k8s.io/kubernetes/cmd/kube-scheduler"},
	{Kubectl, "kube", "k8s.io/kubernetes/cmd/kubectl"},
}

// CacheDir is where built binaries live, outside the repository: $FLEETWRIGHT_CACHE, else
// $XDG_CACHE_HOME/fleetwright, else ~/.cache/fleetwright.
func CacheDir() string {
	if d := os.Getenv("FLEETWRIGHT_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "fleetwright")
	}
	return filepath.Join(os.TempDir(), "fleetwright-cache")
}

// BinDir is the directory holding the binaries of the pinned versions.
func BinDir() string {
	key := fmt.Sprintf("k8s-%s_etcd-%s_kwok-%s", KubernetesVersion, EtcdVersion, KwokVersion)
	return filepath.Join(CacheDir(), "localcluster", key, "bin")
}

// BinariesPresent reports whether every binary is already built.
func BinariesPresent() bool {
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(BinDir(), b.name)); err != nil {
			return false
		}
	}
	return true
}

// EnsureBinaries builds whatever binary is missing from BinDir, from the pinned modules in
// this repository, printing progress to out. Concurrent callers (parallel test binaries) wait
// on a file lock instead of building twice. A cold build takes ~15 minutes on 2 cores.
func EnsureBinaries(ctx context.Context, out io.Writer) (string, error) {
	dir := BinDir()
	if BinariesPresent() {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating binary directory: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(filepath.Dir(dir), "build.lock"), out)
	if err != nil {
		return "", err
	}
	defer unlock()

	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	start := time.Now()
	for _, b := range binaries {
		target := filepath.Join(dir, b.name)
		if _, err := os.Stat(target); err == nil {
			continue
		}
		if err := build(ctx, filepath.Join(root, b.module), b, target, out); err != nil {
			return "", err
		}
	}
	fmt.Fprintf(out, "localcluster: all binaries ready in %s (%s)\n", dir, time.Since(start).Round(time.Second))
	return dir, nil
}

func build(ctx context.Context, moduleDir string, b binary, target string, out io.Writer) error {
	fmt.Fprintf(out, "localcluster: building %s from %s (cold builds take minutes; progress every 15s)\n", b.name, b.pkg)
	tmp := target + ".tmp"
	ldflags := ""
	switch b.module {
	case "kube":
		ldflags = "-X k8s.io/component-base/version.gitVersion=" + KubernetesVersion +
			" -X k8s.io/client-go/pkg/version.gitVersion=" + KubernetesVersion
	case "jaeger":
		ldflags = "-X github.com/jaegertracing/jaeger/internal/version.latestVersion=" + JaegerVersion
	}
	cmd := exec.CommandContext(ctx, goTool(), "build", "-v", "-ldflags", ldflags, "-o", tmp, b.pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GONOSUMDB="+nosumdb, "CGO_ENABLED=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("building %s: %w", b.name, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("building %s: %w", b.name, err)
	}
	var compiled atomic.Int64
	var tail lastLines
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			compiled.Add(1)
			tail.add(sc.Text())
		}
	}()
	start := time.Now()
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	waitErr := make(chan error, 1)
	go func() { <-done; waitErr <- cmd.Wait() }()
	for {
		select {
		case <-tick.C:
			fmt.Fprintf(out, "localcluster: building %s: %d packages compiled, %s elapsed\n", b.name, compiled.Load(), time.Since(start).Round(time.Second))
		case err := <-waitErr:
			if err != nil {
				return fmt.Errorf("building %s: %w; last output:\n%s", b.name, err, tail.String())
			}
			if err := os.Rename(tmp, target); err != nil {
				return fmt.Errorf("installing %s: %w", b.name, err)
			}
			fmt.Fprintf(out, "localcluster: built %s in %s\n", b.name, time.Since(start).Round(time.Second))
			return nil
		}
	}
}

// lockFile takes an exclusive flock, telling the user when it has to wait for another build.
func lockFile(ctx context.Context, path string, out io.Writer) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening build lock: %w", err)
	}
	said := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !said {
			fmt.Fprintf(out, "localcluster: another process is building the binaries; waiting for it\n")
			said = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// moduleRoot finds tools/localcluster/modules in the source tree this package was built from,
// or below $FLEETWRIGHT_ROOT / the working directory's repository.
func moduleRoot() (string, error) {
	var candidates []string
	if r := os.Getenv("FLEETWRIGHT_ROOT"); r != "" {
		candidates = append(candidates, filepath.Join(r, "tools", "localcluster", "modules"))
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		candidates = append(candidates, filepath.Join(filepath.Dir(file), "modules"))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			candidates = append(candidates, filepath.Join(d, "tools", "localcluster", "modules"))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(c, "kube", "go.mod")); err == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("finding tools/localcluster/modules: not found from %v (set FLEETWRIGHT_ROOT to the repository)", candidates)
}

// goTool is the go command that builds the binaries: the one on PATH, else the usual install.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if p := "/usr/local/go/bin/go"; fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// lastLines keeps the last few lines of a build's output for error messages.
type lastLines struct{ lines []string }

func (l *lastLines) add(s string) {
	l.lines = append(l.lines, s)
	if len(l.lines) > 20 {
		l.lines = l.lines[1:]
	}
}

func (l *lastLines) String() string {
	s := ""
	for _, x := range l.lines {
		s += x + "\n"
	}
	return s
}
