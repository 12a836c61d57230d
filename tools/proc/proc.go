// Package proc runs the local stack's components as child processes: each logs to its own file,
// dies with its parent (Pdeathsig) and stops with SIGTERM, then SIGKILL after a grace period.
package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
