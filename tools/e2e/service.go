package e2e

import (
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetwright/fleetwright/tools/proc"
)

var (
	buildMu sync.Mutex
	built   = map[string]string{}
	binDir  string
)

// binDirPrefix names a test binary's directory of built services, suffixed with its pid: a
// test binary cannot remove it when it exits (the last test does not know it is the last), so
// the next one removes those whose process is gone.
const binDirPrefix = "fleetwright-e2e-bin-"

// removeStaleBinDirs removes the build directories of test binaries that have exited (some
// 500 MB each) and are older than an hour.
func removeStaleBinDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), binDirPrefix))
		if err == nil && pid > 0 && pid <= math.MaxInt32 && syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // its test binary still runs
		}
		if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) > time.Hour {
			_ = os.RemoveAll(d)
		}
	}
}

// Build compiles a main package of the repository (e.g. "./services/launcher") once per test
// binary and returns the executable's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	if binDir == "" {
		removeStaleBinDirs()
		d := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", binDirPrefix, os.Getpid()))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("creating bin dir: %v", err)
		}
		binDir = d
	}
	out := filepath.Join(binDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = Root(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, b)
	}
	built[pkg] = out
	return out
}

// Service is a Fleetwright service running as its own process.
type Service struct {
	*proc.Process
	t testing.TB
}

// Start runs a built service with args and extra environment, logging to a file under the
// test's temp dir. It is stopped (SIGTERM, then SIGKILL) when the test ends; if the test
// failed, its log is printed.
func Start(t testing.TB, name, bin string, args, env []string) *Service {
	t.Helper()
	logDir := t.TempDir()
	p, err := proc.Start(name, bin, args, env, logDir)
	if err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	s := &Service{Process: p, t: t}
	t.Cleanup(func() {
		_ = p.Stop(15 * time.Second)
		if t.Failed() {
			s.DumpLog()
		}
	})
	return s
}

// Kill ends the process at once, as a crash would.
func (s *Service) Kill() {
	_ = syscall.Kill(s.Pid(), syscall.SIGKILL)
	_ = s.Stop(5 * time.Second)
}

// Log returns what the service has logged so far.
func (s *Service) Log() string {
	b, _ := os.ReadFile(s.LogPath)
	return string(b)
}

// DumpLog prints the tail of the service's log into the test output.
func (s *Service) DumpLog() {
	log := s.Log()
	if len(log) > 20000 {
		log = "…" + log[len(log)-20000:]
	}
	s.t.Logf("---- %s log (%s) ----\n%s", s.Name, s.LogPath, log)
}

// FreeAddr returns a free loopback host:port for a service to listen on, from below the
// kernel's ephemeral range (32768 and up on Linux): a port the kernel hands out for listen(":0")
// is also one it may pick as the local port of any outgoing connection meanwhile, and a service
// given such a port found it taken ("bind: address already in use") under the parallel e2e
// tests' load. Ports are handed out once per test binary, tried by listening, and spread by
// the process id, so parallel test binaries rarely try the same one.
func FreeAddr(t testing.TB) string {
	t.Helper()
	freeMu.Lock()
	defer freeMu.Unlock()
	const lo, n = 20000, 12000 // 20000–31999
	if freeNext == 0 {
		freeNext = os.Getpid()*7919 + int(time.Now().UnixNano()%n)
	}
	for range n {
		port := lo + freeNext%n
		freeNext++
		if freeGiven[port] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		_ = l.Close()
		freeGiven[port] = true
		return addr
	}
	t.Fatalf("finding a free port: none of 127.0.0.1:%d–%d is free", lo, lo+n-1)
	return ""
}

var (
	freeMu    sync.Mutex
	freeNext  int
	freeGiven = map[int]bool{}
)
