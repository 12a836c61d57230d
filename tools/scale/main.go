// Command scale measures the whole system at scale: it makes N pods pending at once (a mix like
// Karpenter's scheduling benchmark: plain, zone spread, hostname spread, zone affinity, hostname
// anti-affinity) on a pool allowing the real catalog, prints as they happen the time to pending,
// NodeClaims, instances, nodes ready and pods Running, then each service's Kubernetes API calls
// (by verb and resource), the NATS messages and bytes, and each service's peak RSS and CPU
// seconds. With --floor (the default) it also times the same pods on the same number and shape
// of nodes made beforehand — kube-scheduler and kwok alone — and ends with
//
//	scale: N pods Running in X s (floor Y s, ratio X/Y), K nodes, peak RSS <svc>=<MB>…
//
// It runs against `make up`'s stack (.local/env), or with --stack own starts one with `make up`
// and stops it after.
//
// With --peer karpenter it first runs the same workload with Karpenter's kwok provider (a pinned
// release, built once into the cache) in Fleetwright's place on the same control plane — the
// services held, Karpenter's CRDs installed, a NodePool equivalent to --pool's, the emulator's
// catalog — then restores Fleetwright and runs it, and ends with
//
//	peer: N pods Running — karpenter X s, fleetwright Y s, speed-up X/Y
//
//	go run ./tools/scale --pods 1000
//	go run ./tools/scale --pods 5000 --mix plain=1,host-anti=1 --pool my-pool.yaml
//	go run ./tools/scale --pods 5000 --stack own --profile /tmp/profiles   # then go tool pprof -top
//	go run ./tools/scale --pods 1000 --mix plain=1 --peer karpenter
package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	emuclient "github.com/fleetwright/fleetwright/tools/awsemu/client"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

//go:embed testdata/pool.yaml
var defaultPool []byte

// stackServices are `make up`'s services and their admin ports (tools/stack: 8081…).
var stackServices = []string{"pod-watcher", "scheduler", "launcher", "terminator"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "scale: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	pods := fs.Int("pods", 1000, "pods to make pending at once")
	mixFlag := fs.String("mix", DefaultMix.String(), "share of each pod shape: "+strings.Join(Shapes, ", "))
	pool := fs.String("pool", "", "a manifest with the NodePool (and node class) to scale on; default: the real catalog, on demand, amd64 (tools/scale/testdata/pool.yaml)")
	stack := fs.String("stack", "running", "running: `make up`'s stack (.local/env); own: start one with `make up` and stop it after")
	state := fs.String("state", ".local", "the stack's state directory (its env file)")
	ns := fs.String("namespace", "scale", "namespace of the pods (the floor uses <namespace>-floor)")
	withFloor := fs.Bool("floor", true, "also time the same pods on nodes made beforehand")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for the pods to run")
	workers := fs.Int("workers", 32, "pod creates in flight")
	keep := fs.Bool("keep", false, "leave the pods (and so the nodes) in place")
	profile := fs.String("profile", "", "a directory for each service's CPU profile (the run's first --profile-seconds) and heap profile (at the end); the services must run with ENABLE_PROFILING=true, which --stack own sets")
	profileSeconds := fs.Int("profile-seconds", 30, "how long the CPU profiles cover, from the first pod create")
	peer := fs.String("peer", "", "karpenter: first run the same workload with Karpenter's kwok provider in Fleetwright's place, then compare")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pods <= 0 {
		return errors.New("--pods must be positive")
	}
	mix, err := ParseMix(*mixFlag)
	if err != nil {
		return err
	}
	manifest := defaultPool
	if *pool != "" {
		if manifest, err = os.ReadFile(*pool); err != nil {
			return fmt.Errorf("reading --pool: %w", err)
		}
	}
	switch *stack {
	case "running":
	case "own":
		if _, err := os.Stat(filepath.Join(*state, "supervisor.pid")); err == nil {
			return fmt.Errorf("a stack is already running (%s): use --stack running, or `make down` first", *state)
		}
		if *profile != "" {
			os.Setenv("ENABLE_PROFILING", "true") // inherited by the stack's services
		}
		if err := makeTarget(ctx, "up"); err != nil {
			return err
		}
		defer func() { _ = makeTarget(context.WithoutCancel(ctx), "down") }()
	default:
		return fmt.Errorf("--stack %q: want running or own", *stack)
	}
	env, err := e2e.ReadStackEnv(filepath.Join(*state, "env"))
	if err != nil {
		return fmt.Errorf("%w (start the stack with `make up`, or pass --stack own)", err)
	}
	tg, err := localTarget(env)
	if err != nil {
		return err
	}
	if err := applyManifest(ctx, env, manifest); err != nil {
		return err
	}
	opts := Options{Pods: *pods, Mix: mix, Namespace: *ns, Floor: *withFloor, Timeout: *timeout,
		Workers: *workers, Progress: os.Stdout, Keep: *keep, ProfileDir: *profile, ProfileSeconds: *profileSeconds}
	var kr *Report
	switch *peer {
	case "":
	case "karpenter":
		ps, err := localPeer(ctx, env, *state)
		if err != nil {
			return err
		}
		if kr, err = RunKarpenter(ctx, ps, tg, opts, manifest); err != nil {
			return fmt.Errorf("karpenter's run: %w", err)
		}
		fmt.Println("\n== karpenter ==")
		kr.Summary(os.Stdout)
		fmt.Println("\n== fleetwright ==")
	default:
		return fmt.Errorf("--peer %q: want karpenter", *peer)
	}
	r, err := Run(ctx, tg, opts)
	if err != nil {
		return err
	}
	r.Summary(os.Stdout)
	problems := len(r.Problems)
	if kr != nil {
		fmt.Println(kr.Line())
		fmt.Println(r.Line())
		fmt.Println(PeerLine(kr, r))
		problems += len(kr.Problems)
	}
	if problems > 0 {
		return fmt.Errorf("%d problem(s), see above", problems)
	}
	return nil
}

// localPeer is `make up`'s stack as the peer run drives it: the supervisor holds the services
// while its hold file exists.
func localPeer(ctx context.Context, env map[string]string, state string) (PeerStack, error) {
	for _, k := range []string{"FLEETWRIGHT_HOLD_FILE", "AWS_REGION", "AWS_ENDPOINT_URL_EC2"} {
		if env[k] == "" {
			return PeerStack{}, fmt.Errorf("the stack's env file has no %s: restart it with this version (make down && make up)", k)
		}
	}
	if _, err := os.Stat(filepath.Join("deploy", "crds")); err != nil {
		return PeerStack{}, fmt.Errorf("run the peer from the repository's root (it restores deploy/crds): %w", err)
	}
	zones, err := emulatorZones(ctx, env["AWS_ENDPOINT_URL_EC2"], env["AWS_REGION"])
	if err != nil {
		return PeerStack{}, err
	}
	boot, err := time.ParseDuration(or(env["AWSEMU_BOOT_DELAY"], "0s"))
	if err != nil {
		return PeerStack{}, fmt.Errorf("the stack's AWSEMU_BOOT_DELAY: %w", err)
	}
	admin := map[string]string{}
	for i, svc := range stackServices {
		admin[svc] = fmt.Sprintf("http://127.0.0.1:%d", 8081+i)
	}
	hold := env["FLEETWRIGHT_HOLD_FILE"]
	return PeerStack{
		Kubeconfig: env["KUBECONFIG"],
		Kubectl: func(ctx context.Context, stdin []byte, args ...string) (string, error) {
			return kubectl(ctx, env, stdin, args...)
		},
		Hold: func(ctx context.Context) error {
			if err := os.WriteFile(hold, []byte("tools/scale --peer karpenter\n"), 0o644); err != nil {
				return err
			}
			return waitAdmin(ctx, admin, false, time.Minute)
		},
		Release: func(ctx context.Context) error {
			if err := os.Remove(hold); err != nil && !os.IsNotExist(err) {
				return err
			}
			return waitAdmin(ctx, admin, true, 3*time.Minute)
		},
		Root: ".", Dir: filepath.Join(state, "peer"), Region: env["AWS_REGION"], Zones: zones, BootDelay: boot, Out: os.Stdout,
	}, nil
}

// localTarget connects to the stack `make up` wrote env for.
func localTarget(env map[string]string) (Target, error) {
	for _, k := range []string{"KUBECONFIG", "NATS_URL", "AWSEMU_ADMIN_URL"} {
		if env[k] == "" {
			return Target{}, fmt.Errorf("the stack's env file has no %s", k)
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"])
	if err != nil {
		return Target{}, fmt.Errorf("loading kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = 1000, 2000 // the harness is not what is measured
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return Target{}, err
	}
	c, err := e2e.NewClient(rc)
	if err != nil {
		return Target{}, err
	}
	admin := map[string]string{}
	for i, svc := range stackServices {
		admin[svc] = fmt.Sprintf("http://127.0.0.1:%d", 8081+i)
	}
	return Target{Kube: kube, Client: c, Emu: emuclient.New(strings.TrimSuffix(env["AWSEMU_ADMIN_URL"], "/_emu")),
		NATSURL: env["NATS_URL"], Admin: admin}, nil
}

func applyManifest(ctx context.Context, env map[string]string, manifest []byte) error {
	if _, err := kubectl(ctx, env, manifest, "apply", "-f", "-"); err != nil {
		return fmt.Errorf("applying the pool: %w", err)
	}
	return nil
}

// kubectl runs the stack's kubectl (the control plane's build, on the env file's PATH) with
// stdin (nil: none), returning its output; a failure carries the output.
func kubectl(ctx context.Context, env map[string]string, stdin []byte, args ...string) (string, error) {
	bin := "kubectl"
	for _, dir := range filepath.SplitList(strings.ReplaceAll(env["PATH"], "$PATH", os.Getenv("PATH"))) {
		if _, err := os.Stat(filepath.Join(dir, "kubectl")); err == nil {
			bin = filepath.Join(dir, "kubectl")
			break
		}
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", env["KUBECONFIG"]}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func makeTarget(ctx context.Context, target string) error {
	cmd := exec.CommandContext(ctx, "make", target)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("make %s: %w", target, err)
	}
	return nil
}
