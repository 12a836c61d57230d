// Command stack runs Fleetwright's local stack without Docker: a real Kubernetes control plane
// with kwok kubelets (tools/localcluster) and a real nats-server with JetStream, each a child
// of one background supervisor, logging under .local/logs. The supervisor starts a service
// that dies again (backing off a crash loop) and records its pid in .local/pids/<service>.pid.
//
//	stack build    build the control-plane binaries and Jaeger into the cache (progress shown)
//	stack build-peer  build Karpenter's kwok provider into the cache (tools/scale --peer karpenter)
//	stack up       start the supervisor in the background, wait until ready, write .local/env
//	stack status   show each component
//	stack down     stop the supervisor and every process it started
//	stack demo     up, then play the getting-started workload and show each step's time
//
// While .local/hold exists (FLEETWRIGHT_HOLD_FILE in .local/env) the supervisor keeps the four
// services stopped, and starts them again once it is removed: tools/scale --peer karpenter runs
// Karpenter on the same control plane in between.
//
// The supervisor also runs Jaeger (built from its Go module, tools/localcluster/modules/jaeger),
// and the services export their traces to it.
//
// Flags have environment fallbacks (FLEETWRIGHT_STATE, NATS_PORT, KUBE_APISERVER_PORT,
// JAEGER_PORT, JAEGER_OTLP_PORT, NATS_SERVER_BIN).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/fleetwright/fleetwright/pkg/service"
	"github.com/fleetwright/fleetwright/tools/localcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "stack: %v\n", err)
		os.Exit(1)
	}
}

// config is the validated command line, passed down as one struct.
type config struct {
	state       string // .local: state, logs, env file
	natsPort    int
	apiPort     int
	jaegerPort  int // Jaeger's UI and HTTP API
	otlpPort    int // Jaeger's OTLP/HTTP receiver
	natsBin     string
	bootDelay   time.Duration
	region      string // the emulated AWS region, whose prices the launcher reads
	demoTimeout int
}

func (c config) logDir() string     { return filepath.Join(c.state, "logs") }
func (c config) pidFile() string    { return filepath.Join(c.state, "supervisor.pid") }
func (c config) readyFile() string  { return filepath.Join(c.state, "ready") }
func (c config) pidDir() string     { return filepath.Join(c.state, "pids") }
func (c config) holdFile() string   { return filepath.Join(c.state, "hold") }
func (c config) envFile() string    { return filepath.Join(c.state, "env") }
func (c config) clusterDir() string { return filepath.Join(c.state, "cluster") }
func (c config) natsURL() string    { return "nats://127.0.0.1:" + strconv.Itoa(c.natsPort) }
func (c config) jaegerURL() string  { return "http://127.0.0.1:" + strconv.Itoa(c.jaegerPort) }
func (c config) otlpURL() string    { return "http://127.0.0.1:" + strconv.Itoa(c.otlpPort) }

func run() error {
	if len(os.Args) < 2 {
		return errors.New("usage: stack build|up|status|down|demo [flags]")
	}
	verb := os.Args[1]
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	var cfg config
	fs.StringVar(&cfg.state, "state", service.Env("FLEETWRIGHT_STATE", ".local"), "directory for state, logs and the env file (env FLEETWRIGHT_STATE)")
	fs.IntVar(&cfg.natsPort, "nats-port", service.EnvInt("NATS_PORT", 4222), "NATS client port on 127.0.0.1 (env NATS_PORT)")
	fs.IntVar(&cfg.apiPort, "apiserver-port", service.EnvInt("KUBE_APISERVER_PORT", 6443), "kube-apiserver port on 127.0.0.1 (env KUBE_APISERVER_PORT)")
	fs.IntVar(&cfg.jaegerPort, "jaeger-port", service.EnvInt("JAEGER_PORT", 16686), "Jaeger UI and HTTP API port on 127.0.0.1 (env JAEGER_PORT)")
	fs.IntVar(&cfg.otlpPort, "jaeger-otlp-port", service.EnvInt("JAEGER_OTLP_PORT", 4318), "Jaeger's OTLP/HTTP port on 127.0.0.1, where the services send traces (env JAEGER_OTLP_PORT)")
	fs.StringVar(&cfg.natsBin, "nats-server", service.Env("NATS_SERVER_BIN", ""), "nats-server binary (env NATS_SERVER_BIN; default: next to this binary)")
	fs.IntVar(&cfg.demoTimeout, "timeout", 300, "demo: seconds to wait for each step")
	fs.DurationVar(&cfg.bootDelay, "boot-delay", service.EnvDuration("AWSEMU_BOOT_DELAY", 0), "emulated instance boot time (env AWSEMU_BOOT_DELAY)")
	fs.StringVar(&cfg.region, "region", service.Env("AWSEMU_REGION", "us-east-1"), "emulated AWS region: its zones and its prices (env AWSEMU_REGION)")
	if err := fs.Parse(os.Args[2:]); err != nil {
		return err
	}
	abs, err := filepath.Abs(cfg.state)
	if err != nil {
		return fmt.Errorf("resolving state directory: %w", err)
	}
	cfg.state = abs
	if cfg.natsBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("locating nats-server: %w", err)
		}
		cfg.natsBin = filepath.Join(filepath.Dir(exe), "nats-server")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch verb {
	case "build":
		return build(ctx)
	case "build-peer":
		_, err := localcluster.EnsureKarpenterKwok(ctx, os.Stdout)
		return err
	case "up":
		return up(ctx, cfg)
	case "supervise":
		return supervise(ctx, cfg)
	case "status":
		return status(ctx, cfg)
	case "down":
		return down(cfg)
	case "demo":
		return demo(ctx, cfg)
	default:
		return fmt.Errorf("unknown command %q: want build, build-peer, up, status, down or demo", verb)
	}
}
