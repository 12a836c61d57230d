// Command soak churns a local Fleetwright stack for a bounded time and checks, every second,
// that no fault made it break an invariant (tools/e2e.Violations: no duplicate or orphaned
// instance, no PodDisruptionBudget broken; at the end, after a settle, also no pod lost and
// no node left tainted).
//
//	go run ./tools/soak --duration 20m [--seed N] [--own-stack] [--replicas N] [--state .local]
//
// Each tick (every 2–6 s, random) it scales one of three Deployments in the namespace soak
// (one under a PDB), sends a spot interruption for a random running spot instance, or kills a
// random service with SIGKILL (restarted at once, as its container would be): with --replicas
// above 1, one replica of it — the scheduler's leader (the Lease's holder), a random replica
// of the others. It prints every injection, a progress line every 10 s and a summary; it
// exits 1 if any invariant broke.
//
// Stack: by default the `make up` stack at --state when its supervisor runs (the supervisor
// restarts a killed service and records the pids under <state>/pids), else — or with
// --own-stack, or --replicas above 1 (`make up` runs one of each) — a private stack in a
// temporary directory, on free loopback ports, torn down at the end. Only loopback URLs are
// accepted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fleetwright/fleetwright/pkg/service"
	"github.com/fleetwright/fleetwright/tools/proc"
)

// maxDuration bounds a soak: it is a bounded run, not a daemon.
const maxDuration = 24 * time.Hour

// maxReplicas bounds --replicas: every copy is a process on this machine.
const maxReplicas = 5

func main() {
	code, err := run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(2)
	}
	os.Exit(code)
}

type config struct {
	duration, settle time.Duration
	seed             uint64
	state            string
	ownStack         bool
	keep             bool
	replicas         int
}

func parseConfig(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.DurationVar(&c.duration, "duration", 20*time.Minute, "how long to inject faults (at most 24h)")
	fs.DurationVar(&c.settle, "settle", 3*time.Minute, "then how long the stack may take to settle before the final check")
	fs.Uint64Var(&c.seed, "seed", 0, "random seed (0: from the clock); printed, so a run can be replayed")
	fs.StringVar(&c.state, "state", service.Env("FLEETWRIGHT_STATE", ".local"), "the `make up` stack's state directory (env FLEETWRIGHT_STATE)")
	fs.BoolVar(&c.ownStack, "own-stack", false, "start a private stack even when `make up` runs")
	fs.BoolVar(&c.keep, "keep", false, "own stack: keep its directory (logs) after the run")
	fs.IntVar(&c.replicas, "replicas", 1, "replicas of every service (above 1: a private stack, as `make up` runs one of each); a kill kills one, the scheduler's leader")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	var errs []error
	if c.duration <= 0 || c.duration > maxDuration {
		errs = append(errs, fmt.Errorf("--duration %s: must be above 0 and at most %s", c.duration, maxDuration))
	}
	if c.settle <= 0 || c.settle > time.Hour {
		errs = append(errs, fmt.Errorf("--settle %s: must be above 0 and at most 1h", c.settle))
	}
	if c.replicas < 1 || c.replicas > maxReplicas {
		errs = append(errs, fmt.Errorf("--replicas %d: must be 1 to %d", c.replicas, maxReplicas))
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	return c, errors.Join(errs...)
}

func run() (int, error) {
	cfg, err := parseConfig(os.Args[1:])
	if err != nil {
		return 0, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var t Target
	if !cfg.ownStack && cfg.replicas == 1 && supervisorAlive(cfg.state) {
		fmt.Printf("soak: using the running stack at %s (--own-stack starts a private one)\n", cfg.state)
		r, err := openRunningStack(cfg.state)
		if err != nil {
			return 0, err
		}
		if t, err = r.target(); err != nil {
			return 0, err
		}
	} else {
		root, err := proc.RepoRoot()
		if err != nil {
			return 0, err
		}
		dir, err := os.MkdirTemp("", "fleetwright-soak-")
		if err != nil {
			return 0, err
		}
		fmt.Printf("soak: starting a private stack in %s, %d replica(s) of every service\n", dir, cfg.replicas)
		s, err := startOwnStack(ctx, root, dir, os.Stdout, cfg.replicas)
		if err != nil {
			return 0, fmt.Errorf("%w (logs in %s)", err, dir)
		}
		defer func() {
			fmt.Println("soak: stopping the private stack")
			s.Stop()
			if cfg.keep {
				fmt.Printf("soak: logs kept in %s\n", filepath.Join(dir, "logs"))
			} else {
				_ = os.RemoveAll(dir)
			}
		}()
		if t, err = s.target(); err != nil {
			return 0, err
		}
	}
	rep, err := Run(ctx, t, Options{Duration: cfg.duration, Settle: cfg.settle, Seed: cfg.seed,
		TickMin: 2 * time.Second, TickMax: 6 * time.Second, Progress: 10 * time.Second, Out: os.Stdout})
	if rep != nil {
		rep.Print(os.Stdout)
	}
	if err != nil {
		return 0, err
	}
	if rep.Failed() {
		return 1, nil
	}
	return 0, nil
}
