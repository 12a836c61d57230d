package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetwright/fleetwright/tools/localcluster"
	"github.com/fleetwright/fleetwright/tools/proc"
)

// build builds what the stack runs from the cache: the control plane, then Jaeger.
func build(ctx context.Context) error {
	if _, err := localcluster.EnsureBinaries(ctx, os.Stdout); err != nil {
		return err
	}
	_, err := localcluster.EnsureJaeger(ctx, os.Stdout)
	return err
}

// up builds what is missing in the foreground (so its progress is seen), then starts the
// supervisor detached and follows its log until it is ready or has failed.
func up(ctx context.Context, cfg config) error {
	if pid, ok := supervisorPID(cfg); ok {
		fmt.Printf("stack: already running (supervisor pid %d)\n", pid)
		return printEnv(cfg)
	}
	if err := build(ctx); err != nil {
		return err
	}
	if _, err := os.Stat(cfg.natsBin); err != nil {
		return fmt.Errorf("nats-server binary %s: %w (run `make up`, which builds it)", cfg.natsBin, err)
	}
	for _, port := range []int{cfg.natsPort, cfg.apiPort, cfg.jaegerPort, cfg.otlpPort} {
		if err := portFree(port); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(cfg.logDir(), 0o755); err != nil {
		return fmt.Errorf("creating log directory: %w", err)
	}
	_ = os.Remove(cfg.readyFile())
	logPath := filepath.Join(cfg.logDir(), "supervisor.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("creating supervisor log: %w", err)
	}
	defer logFile.Close()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locating own binary: %w", err)
	}
	args := append([]string{"supervise"}, os.Args[2:]...)
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command and the terminal
	cmd.Env = append(os.Environ(), "FLEETWRIGHT_STATE="+cfg.state)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting supervisor: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Printf("stack: starting (supervisor pid %d, log %s)\n", cmd.Process.Pid, logPath)
	follow := newFollower(logPath)
	deadline := time.After(5 * time.Minute)
	for {
		follow.print(os.Stdout)
		if _, err := os.Stat(cfg.readyFile()); err == nil {
			follow.print(os.Stdout)
			return printEnv(cfg)
		}
		select {
		case err := <-exited:
			follow.print(os.Stdout)
			return fmt.Errorf("supervisor exited before the stack was ready (%v); see %s", err, cfg.logDir())
		case <-deadline:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return fmt.Errorf("stack not ready after 5 minutes; see %s", cfg.logDir())
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// supervise is the background process: it owns every component, writes the env file once all
// are up, and stops them all on SIGTERM.
func supervise(ctx context.Context, cfg config) error {
	if err := os.WriteFile(cfg.pidFile(), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("writing pid file: %w", err)
	}
	defer os.Remove(cfg.pidFile())
	defer os.Remove(cfg.readyFile())
	_ = os.RemoveAll(cfg.pidDir())
	defer os.RemoveAll(cfg.pidDir())
	_ = os.Remove(cfg.holdFile()) // a hold is one stack's, never the next one's
	defer os.Remove(cfg.holdFile())

	cluster, err := localcluster.Start(ctx, localcluster.Options{
		Dir: cfg.clusterDir(), Out: os.Stdout, APIServerPort: cfg.apiPort, Fresh: true,
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stack: stopping control plane")
		if err := cluster.Stop(); err != nil {
			fmt.Printf("stack: %v\n", err)
		}
	}()
	natsDir := filepath.Join(cfg.state, "nats")
	_ = os.RemoveAll(natsDir)
	nats, err := proc.Start("nats-server", cfg.natsBin, []string{
		"--jetstream", "--store_dir", natsDir,
		"--addr", "127.0.0.1", "--port", strconv.Itoa(cfg.natsPort),
		"--http_port", strconv.Itoa(cfg.natsPort + 4000), // monitoring, 8222 by default
		"--server_name", "fleetwright-local",
	}, nil, cfg.logDir())
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stack: stopping nats-server")
		_ = nats.Stop(10 * time.Second)
	}()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = proc.WaitFor(wctx, nats, "nats-server", func(ctx context.Context) error {
		return proc.HTTPOK(ctx, nil, "http://127.0.0.1:"+strconv.Itoa(cfg.natsPort+4000)+"/healthz?js-enabled-only=true", "")
	})
	cancel()
	if err != nil {
		return err
	}
	fmt.Printf("stack: nats-server ready at %s\n", cfg.natsURL())
	jaeger, err := localcluster.StartJaeger(ctx, localcluster.JaegerOptions{
		Dir: cfg.state, Out: os.Stdout, QueryPort: cfg.jaegerPort, OTLPPort: cfg.otlpPort,
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stack: stopping jaeger")
		_ = jaeger.Stop(10 * time.Second)
	}()
	procs, err := startComponents(ctx, cfg, cluster)
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			fmt.Printf("stack: stopping %s\n", procs[i].Name)
			_ = procs[i].Stop(15 * time.Second)
		}
	}()
	if err != nil {
		return err
	}
	if err := writeEnv(cfg, cluster); err != nil {
		return err
	}
	if err := os.WriteFile(cfg.readyFile(), []byte(time.Now().Format(time.RFC3339)), 0o644); err != nil {
		return fmt.Errorf("writing ready marker: %w", err)
	}
	fmt.Println("stack: ready")
	// Watch the children: a service that dies is started again, as its container would be (a
	// crash loop backs off); any other death is reported once, the rest kept running so its
	// log can be read.
	// While the hold file exists the services are stopped and kept stopped (another autoscaler
	// works the same control plane: tools/scale --peer); once it is gone they start again.
	reported := map[string]bool{}
	restarts := map[string]*restart{}
	held := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
		_, statErr := os.Stat(cfg.holdFile())
		hold := statErr == nil
		if err := cluster.Healthy(); err != nil && !reported["cluster"] {
			fmt.Printf("stack: %v\n", err)
			reported["cluster"] = true
		}
		for _, p := range []*proc.Process{nats, jaeger.Process} {
			if !p.Running() && !reported[p.Name] {
				fmt.Printf("stack: %v\n", p.ExitError())
				reported[p.Name] = true
			}
		}
		for i, p := range procs {
			if hold && slices.Contains(services, p.Name) {
				if p.Running() {
					fmt.Printf("stack: %s held (%s exists): stopping it\n", p.Name, cfg.holdFile())
					_ = p.Stop(15 * time.Second)
				}
				held[p.Name] = true
				continue
			}
			if held[p.Name] {
				delete(held, p.Name)
				fmt.Printf("stack: %s released: starting it\n", p.Name)
				np, err := startComponent(cfg, cluster, p.Name)
				if err != nil {
					fmt.Printf("stack: %v\n", err)
					held[p.Name] = true // tried again on the next round
					continue
				}
				procs[i] = np
				continue
			}
			if p.Running() {
				continue
			}
			if !slices.Contains(services, p.Name) {
				if !reported[p.Name] {
					fmt.Printf("stack: %v\n", p.ExitError())
					reported[p.Name] = true
				}
				continue
			}
			r := restarts[p.Name]
			if r == nil {
				r = &restart{}
				restarts[p.Name] = r
			}
			if !r.due(time.Now()) {
				continue
			}
			fmt.Printf("stack: %v; starting it again\n", p.ExitError())
			np, err := startComponent(cfg, cluster, p.Name)
			if err != nil {
				fmt.Printf("stack: %v\n", err)
				continue
			}
			procs[i] = np
		}
	}
}

// restart spaces out the restarts of one service: at once after a run of a minute or more,
// else after a delay that doubles up to a minute, so a crash loop does not spin.
type restart struct {
	last  time.Time
	delay time.Duration
}

func (r *restart) due(now time.Time) bool {
	if !r.last.IsZero() && now.Sub(r.last) < r.delay {
		return false
	}
	switch {
	case r.last.IsZero() || now.Sub(r.last) > time.Minute+r.delay:
		r.delay = time.Second
	default:
		r.delay = min(2*r.delay, time.Minute)
	}
	r.last = now
	return true
}

func writeEnv(cfg config, cluster *localcluster.Cluster) error {
	lines := []string{
		"# Written by `make up`; source it: . " + cfg.envFile(),
		"export KUBECONFIG=" + cluster.Kubeconfig,
		"export NATS_URL=" + cfg.natsURL(),
		"export JAEGER_URL=" + cfg.jaegerURL(),
		"export AWSEMU_ADMIN_URL=http://" + awsemuAddr + "/_emu",
		"export FLEETWRIGHT_LOG_DIR=" + cfg.logDir(),
		// While this file exists the supervisor keeps the four services stopped.
		"export FLEETWRIGHT_HOLD_FILE=" + cfg.holdFile(),
		"export AWSEMU_BOOT_DELAY=" + cfg.bootDelay.String(),
		"export PATH=" + cluster.BinDir + ":$PATH",
	}
	for _, e := range awsEnv(cfg.region) {
		lines = append(lines, "export "+e)
	}
	return os.WriteFile(cfg.envFile(), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func printEnv(cfg config) error {
	b, err := os.ReadFile(cfg.envFile())
	if err != nil {
		return fmt.Errorf("reading %s: %w", cfg.envFile(), err)
	}
	fmt.Printf("\nThe local stack is up. Use it from a shell with:\n\n  . %s\n  kubectl get nodes\n  go run ./tools/fleetwright tap   # every message on fleetwright.>, one JSON line each\n\n%s\nTraces: %s (Jaeger)\nLogs: %s\nStop it with: make down\n", cfg.envFile(), b, cfg.jaegerURL(), cfg.logDir())
	return nil
}

// down stops the supervisor, which stops its children; the children also die with it.
func down(cfg config) error {
	pid, ok := supervisorPID(cfg)
	if !ok {
		fmt.Println("stack: not running")
		return nil
	}
	fmt.Printf("stack: stopping supervisor pid %d\n", pid)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 600; i++ {
		if syscall.Kill(pid, 0) != nil {
			fmt.Println("stack: stopped")
			_ = os.Remove(cfg.pidFile())
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	_ = os.Remove(cfg.pidFile())
	return errors.New("supervisor did not stop within 60s; killed it")
}

func status(ctx context.Context, cfg config) error {
	pid, ok := supervisorPID(cfg)
	if !ok {
		fmt.Println("stack: not running (make up starts it)")
		return nil
	}
	_, ready := os.Stat(cfg.readyFile())
	fmt.Printf("supervisor  pid %d  ready=%v\n", pid, ready == nil)
	natsErr := proc.HTTPOK(ctx, nil, "http://127.0.0.1:"+strconv.Itoa(cfg.natsPort+4000)+"/healthz", "")
	fmt.Printf("nats-server %s  %s\n", cfg.natsURL(), okOr(natsErr))
	jaegerErr := proc.HTTPOK(ctx, nil, cfg.jaegerURL()+"/api/services", "")
	fmt.Printf("%-11s %s  %s (traces in from %s)\n", "jaeger", cfg.jaegerURL(), okOr(jaegerErr), cfg.otlpURL())
	exe, _ := os.Executable()
	for _, c := range components(cfg, &localcluster.Cluster{Kubeconfig: filepath.Join(cfg.clusterDir(), "kubeconfig")}) {
		state := okOr(proc.HTTPOK(ctx, nil, c.health, ""))
		if _, err := os.Stat(filepath.Join(filepath.Dir(exe), c.name)); err != nil {
			state = "not built (not part of this stack)"
		}
		fmt.Printf("%-11s %s  %s\n", c.name, c.health, state)
	}
	return nil
}

func okOr(err error) string {
	if err != nil {
		return "DOWN: " + err.Error()
	}
	return "ok"
}

func supervisorPID(cfg config) (int, bool) {
	b, err := os.ReadFile(cfg.pidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	return pid, true
}

func portFree(port int) error {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is taken (%v): stop what uses it, or pick another with the flag / env variable", port, err)
	}
	return l.Close()
}

// follower prints the new lines of a log file.
type follower struct {
	path   string
	offset int64
}

func newFollower(path string) *follower { return &follower{path: path} }

func (f *follower) print(w io.Writer) {
	file, err := os.Open(f.path)
	if err != nil {
		return
	}
	defer file.Close()
	if _, err := file.Seek(f.offset, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReader(file)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return // partial line: read it next time
		}
		f.offset += int64(len(line))
		fmt.Fprint(w, "  "+line)
	}
}
