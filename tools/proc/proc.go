// Package proc runs the local stack's components as child processes: each logs to its own file,
// dies with its parent (Pdeathsig) and stops with SIGTERM, then SIGKILL after a grace period.
package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is one component running as a child, logging to <logDir>/<name>.log.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	err     error
}

// Start runs bin with args; env entries are added to the parent's environment.
func Start(name, bin string, args, env []string, logDir string) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Children die with their parent, so a killed test or supervisor leaves no strays; each
	// gets its own process group so a terminal's Ctrl-C reaches only the supervisor.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, cmd: cmd, LogPath: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// Running reports whether the process is still alive.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// ExitError describes how the process ended, pointing at its log.
func (p *Process) ExitError() error {
	return fmt.Errorf("%s exited (%v); see %s", p.Name, p.err, p.LogPath)
}

// Stop sends SIGTERM, waits up to grace, then SIGKILLs.
func (p *Process) Stop(grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, p.cmd.Process.Pid)
	}
}

// WaitFor polls check until it succeeds, the process dies, or ctx ends.
func WaitFor(ctx context.Context, p *Process, what string, check func(context.Context) error) error {
	var last error
	for {
		if err := check(ctx); err == nil {
			return nil
		} else {
			last = err
		}
		if p != nil && !p.Running() {
			return fmt.Errorf("waiting for %s: %w", what, p.ExitError())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Listens reports whether the process itself holds a listening TCP socket on port (read from
// Linux's /proc). A health check alone cannot tell: when a port picked free is taken before the
// process binds it, whatever took it may answer the check (another stack's component does).
func (p *Process) Listens(port int) (bool, error) {
	sockets := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			return false, fmt.Errorf("reading the socket table: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)        // sl local_address rem_address st ... inode
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			hexPort := f[1][strings.LastIndexByte(f[1], ':')+1:]
			if v, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(v) == port {
				sockets["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(sockets) == 0 {
		return false, nil
	}
	dir := fmt.Sprintf("/proc/%d/fd", p.Pid())
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("reading %s's open files: %w", p.Name, err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && sockets[target] {
			return true, nil
		}
	}
	return false, nil
}

// ServedBy wraps a health check of a component serving on port: it passes only once the check
// does and the component itself listens on the port.
func ServedBy(p *Process, port int, check func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := check(ctx); err != nil {
			return err
		}
		ours, err := p.Listens(port)
		if err != nil {
			return err
		}
		if !ours {
			return fmt.Errorf("port %d answers, but %s does not listen on it (another process holds it)", port, p.Name)
		}
		return nil
	}
}
