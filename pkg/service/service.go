// Package service is the skeleton the four Fleetwright services share, so they read alike:
//
//	main()  ──> service.Main(name, run)        signals → context, exit code, one error line
//	run = service.Runner(name, parse, serve):
//	        ──> parse: flags (Common.Register  every flag has an environment fallback
//	            + the service's own)
//	        ──> service.Start(ctx, Options)    logger, tracing, admin port, NATS, kube client
//	        ──> serve: the service's own loop  consumers, informers, pollers
//	        ──> rt.Shutdown()                  stop pulling, drain NATS, flush traces
//
// Nothing here knows what a service does; it only wires the parts every one of them needs.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/subject"
	"github.com/fleetwright/fleetwright/pkg/telemetry"
)

// Version is set at build time with -ldflags "-X github.com/fleetwright/fleetwright/pkg/service.Version=...".
var Version = "dev"

// Common holds the flags every service takes.
type Common struct {
	NATSOptions
	// NATSStreamReplicas is how many NATS servers hold each stream (bus.Config.StreamReplicas).
	NATSStreamReplicas int
	Prefix             string
	AdminAddr          string
	// EnableProfiling serves net/http/pprof under /debug/pprof/ on the admin port.
	EnableProfiling bool
	Kubeconfig      string
	KubeQPS         float64
	KubeBurst       int
	// PrintVersion (--version) prints the version and ends the run before anything starts.
	PrintVersion bool
}

// Register adds the common flags to fs, each defaulting to its environment variable, and sets
// fs's usage to the one every service prints (Usage: the version, the flags, the old names).
func (c *Common) Register(fs *flag.FlagSet, defaultAdmin string) {
	c.RegisterNATS(fs, lookupEnv, "nats://127.0.0.1:4222")
	fs.IntVar(&c.NATSStreamReplicas, "nats-stream-replicas", EnvInt("NATS_STREAM_REPLICAS", 1),
		"servers holding each JetStream stream the service creates; never lowered on an existing stream (env NATS_STREAM_REPLICAS)")
	fs.StringVar(&c.Prefix, "prefix", Env("FLEETWRIGHT_PREFIX", "fleetwright"), "subject prefix (env FLEETWRIGHT_PREFIX)")
	fs.StringVar(&c.AdminAddr, "admin-addr", Env("ADMIN_ADDR", defaultAdmin), "admin HTTP address for /metrics, /healthz, /readyz (env ADMIN_ADDR)")
	fs.BoolVar(&c.EnableProfiling, "enable-profiling", EnvBool("ENABLE_PROFILING", false),
		"serve Go's profiles (net/http/pprof) under /debug/pprof/ on the admin port, as Karpenter's --enable-profiling (env ENABLE_PROFILING)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", Env("KUBECONFIG", ""), "kubeconfig path; empty means in-cluster (env KUBECONFIG)")
	fs.Float64Var(&c.KubeQPS, "kube-client-qps", EnvFloat("KUBE_CLIENT_QPS", 200), "Kubernetes client QPS, as Karpenter's setting and default (env KUBE_CLIENT_QPS)")
	fs.IntVar(&c.KubeBurst, "kube-client-burst", EnvInt("KUBE_CLIENT_BURST", 300), "Kubernetes client burst, as Karpenter's setting and default (env KUBE_CLIENT_BURST)")
	fs.BoolVar(&c.PrintVersion, "version", false, "print the version and exit")
	fs.Usage = Usage(fs, fs.Name())
}

// Parse defines the old names of fs's flags (AddAliases) and parses args: the last step of a
// service's flag parsing, once its own flags are defined.
func (c *Common) Parse(fs *flag.FlagSet, args []string) error {
	AddAliases(fs)
	return fs.Parse(args)
}

// Validate checks the common flags.
func (c Common) Validate() error {
	errs := []error{EnvError(), c.ValidateNATS(), unsupportedSettingsError()}
	if c.AdminAddr == "" {
		errs = append(errs, errors.New("--admin-addr is required"))
	}
	if c.NATSStreamReplicas < 0 || c.NATSStreamReplicas > 5 {
		errs = append(errs, fmt.Errorf("--nats-stream-replicas must be 1 to 5 (JetStream's limit), not %d", c.NATSStreamReplicas))
	}
	return errors.Join(errs...)
}

// Options say which parts a service needs.
type Options struct {
	Name   string
	Common Common
	Kube   bool // connect to Kubernetes
}

// Runtime is what Start wired up.
type Runtime struct {
	Name       string
	Log        zerolog.Logger
	Registry   *prometheus.Registry
	Admin      *telemetry.AdminServer
	Bus        *bus.Conn
	Kube       kubernetes.Interface
	RESTConfig *rest.Config
	// Events records Kubernetes Events as fleetwright-<name> (with Kube).
	Events record.EventRecorder

	events          record.EventBroadcaster
	shutdownTracing func(context.Context) error
}

// Start wires logging, tracing, the admin port, NATS and, if asked, the Kubernetes client. It
// ensures the streams the service owns and then waits until the others it uses exist. The admin
// port is up first, so /healthz answers while NATS and those streams are awaited; /readyz
// reports NATS until it is connected, then the streams still missing and who creates them.
func Start(ctx context.Context, o Options) (_ *Runtime, err error) {
	if err := o.Common.Validate(); err != nil {
		return nil, err
	}
	rt := &Runtime{Name: o.Name, Log: telemetry.NewLogger(o.Name, Version), Registry: prometheus.NewRegistry()}
	RouteLogs(rt.Log)
	defer func() {
		if err != nil {
			rt.Close(context.Background())
		}
	}()
	rt.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo(o.Name))
	shutdown, terr := telemetry.SetupTracing(ctx, o.Name, Version)
	err = terr
	if err != nil {
		return nil, fmt.Errorf("setting up tracing: %w", err)
	}
	rt.shutdownTracing = shutdown
	rt.Admin = telemetry.NewAdminServer(o.Common.AdminAddr, rt.Registry)
	if o.Common.EnableProfiling {
		rt.Admin.EnableProfiling()
	}
	if err := rt.Admin.Start(); err != nil {
		return nil, fmt.Errorf("starting admin server: %w", err)
	}
	rt.Log.Info().Str("admin", rt.Admin.Addr()).Bool("profiling", o.Common.EnableProfiling).Str("nats", bus.Redact(o.Common.NATSURL)).Msg("starting")
	if old := OldNamesUsed(); len(old) > 0 {
		rt.Log.Warn().Strs("old_names", old).Msg("settings given under their old names: they work, rename them")
	}
	if o.Kube {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.Common.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig: %w", err)
		}
		cfg.QPS, cfg.Burst = float32(o.Common.KubeQPS), o.Common.KubeBurst
		cfg.UserAgent = "fleetwright-" + o.Name + "/" + Version
		wrap, err := newKubeRequests(rt.Registry)
		if err != nil {
			return nil, err
		}
		cfg.Wrap(wrap)
		rt.RESTConfig = cfg
		if rt.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, fmt.Errorf("creating kubernetes client: %w", err)
		}
		// Events get a client of their own, so its rate limit is their own: a scale-out records
		// an event per pod, and those must never queue ahead of the writes that do the work
		// (each client-go client has its own token bucket).
		events, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
		if err != nil {
			return nil, fmt.Errorf("creating kubernetes events client: %w", err)
		}
		rt.events = record.NewBroadcaster(record.WithContext(ctx))
		rt.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
		rt.Events = rt.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "fleetwright-" + o.Name})
	}
	log := rt.Log
	bc := o.Common.BusConfig()
	bc.Name, bc.Prefix, bc.StreamReplicas, bc.Logger, bc.Registerer = "fleetwright-"+o.Name, o.Common.Prefix, o.Common.NATSStreamReplicas, &log, rt.Registry
	bc.InboxPrefix = subject.Inbox(o.Name)
	rt.Bus, err = bus.Connect(ctx, bc)
	if err != nil {
		return nil, err
	}
	rt.Admin.AddReadiness("nats", rt.Bus.Ready)
	// Each service creates and updates only the streams it owns (subject.OwnedStreams); the
	// others' it waits for, not ready meanwhile, so the services may start in any order.
	if err := rt.Bus.EnsureOwnStreams(ctx, o.Name); err != nil {
		return nil, fmt.Errorf("ensuring streams: %w", err)
	}
	if err := rt.Bus.WaitForStreams(ctx, o.Name, streamWait); err != nil {
		return nil, fmt.Errorf("waiting for streams: %w", err)
	}
	return rt, nil
}

// streamWait is how often Start looks again for the streams other services create.
var streamWait = 2 * time.Second

// RouteLogs sends what the libraries log to log, as the service's own JSON lines: client-go
// (leader election, informers, events) through klog, and controller-runtime through its own
// logger, which would otherwise drop every line and, 30 seconds after its first use, print a
// stack trace saying "log.SetLogger(...) was never called". Start calls it first thing.
func RouteLogs(log zerolog.Logger) {
	klog.SetLogger(telemetry.Logr(log.With().Str("component", "client-go").Logger()))
	crlog.SetLogger(telemetry.Logr(log.With().Str("component", "controller-runtime").Logger()))
}

// Close drains NATS, flushes events and traces and stops the admin port, in that order.
func (rt *Runtime) Close(ctx context.Context) {
	if rt.events != nil {
		rt.events.Shutdown()
	}
	if rt.Bus != nil {
		if err := rt.Bus.Close(); err != nil {
			rt.Log.Warn().Err(err).Msg("draining nats")
		}
	}
	if rt.shutdownTracing != nil {
		if err := rt.shutdownTracing(ctx); err != nil {
			rt.Log.Warn().Err(err).Msg("flushing traces")
		}
	}
	if rt.Admin != nil {
		_ = rt.Admin.Shutdown(ctx)
	}
	rt.Log.Info().Msg("stopped")
}

// Shutdown closes the runtime within CloseTimeout; services defer it right after Start.
func (rt *Runtime) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
	defer cancel()
	rt.Close(ctx)
}

// Config is a service's configuration: a struct that embeds Common.
type Config interface{ common() Common }

func (c Common) common() Common { return c }

// Runner is a service's run, as Main takes it: parse reads its flags, Start wires its Runtime
// (with Kubernetes) and serve runs the service on it; the Runtime is shut down when serve returns.
func Runner[C Config](name string, parse func([]string) (C, error), serve func(context.Context, C, *Runtime) error) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		cfg, err := parse(args)
		if cfg.common().PrintVersion {
			fmt.Println(name, VersionString())
			return nil
		}
		if err != nil {
			return err
		}
		rt, err := Start(ctx, Options{Name: name, Common: cfg.common(), Kube: true})
		if err != nil {
			return err
		}
		defer rt.Shutdown()
		return serve(ctx, cfg, rt)
	}
}

// Main runs a service: SIGINT/SIGTERM cancel the context run gets, and an error ends the
// process with one line on stderr and exit code 1.
func Main(name string, run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// CloseTimeout bounds a service's draining stop.
const CloseTimeout = 30 * time.Second

// Env returns the environment variable (or its old name's, RenamedEnv) or a default.
func Env(key, def string) string {
	if v, ok := lookupEnv(key); ok {
		return v
	}
	return def
}

// EnvInt returns the environment variable as an int; the default when unset.
func EnvInt(key string, def int) int { return envParse(key, def, strconv.Atoi) }

// EnvFloat returns the environment variable as a float; the default when unset.
func EnvFloat(key string, def float64) float64 {
	return envParse(key, def, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
}

// EnvBool returns the environment variable as a bool (true, false, 1, 0, ...); the default
// when unset.
func EnvBool(key string, def bool) bool { return envParse(key, def, strconv.ParseBool) }

// EnvDuration returns the environment variable as a duration; the default when unset.
func EnvDuration(key string, def time.Duration) time.Duration {
	return envParse(key, def, time.ParseDuration)
}

// envErrors holds the environment variables that are set but do not parse, by key. A value a
// user wrote (a ConfigMap's "20" where "20s" was meant) is never replaced by the default in
// silence: Common.Validate, which every service runs at start, refuses to start with it.
var envErrors = struct {
	sync.Mutex
	byKey map[string]error
}{byKey: map[string]error{}}

func envParse[T any](key string, def T, parse func(string) (T, error)) T {
	raw, _ := lookupEnv(key)
	raw = strings.TrimSpace(raw)
	envErrors.Lock()
	defer envErrors.Unlock()
	delete(envErrors.byKey, key)
	if raw == "" {
		return def
	}
	v, err := parse(raw)
	if err != nil {
		envErrors.byKey[key] = fmt.Errorf("environment variable %s=%q does not parse: %w", key, raw, err)
		return def
	}
	return v
}

// EnvError reports the environment variables that are set but do not parse.
func EnvError() error {
	envErrors.Lock()
	defer envErrors.Unlock()
	errs := make([]error, 0, len(envErrors.byKey))
	for _, k := range slices.Sorted(maps.Keys(envErrors.byKey)) {
		errs = append(errs, envErrors.byKey[k])
	}
	return errors.Join(errs...)
}
