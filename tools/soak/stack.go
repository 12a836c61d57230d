package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetwright/fleetwright/pkg/subject"
	emuclient "github.com/fleetwright/fleetwright/tools/awsemu/client"
	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/localcluster"
	"github.com/fleetwright/fleetwright/tools/proc"
)

// services are the Fleetwright services a soak kills, in start order: each after the owners of
// the streams it uses (pkg/subject), as a service waits, not ready, until those exist.
var services = []string{subject.PodWatcher, subject.Launcher, subject.Terminator, subject.Scheduler}

// The own stack's terminator flags: quick enough that a soak of minutes sees interruptions and
// orphans handled, the orphan window the invariant check uses derived from them.
const (
	ownGCGrace    = 30 * time.Second
	ownGCInterval = 5 * time.Second
	// restartAllowance covers a terminator killed just before its garbage collector would run.
	restartAllowance = 15 * time.Second
)

// ownStack is a private stack the soak starts and owns: a control plane with kwok, an
// in-process nats-server, the emulator and the services as child processes (replicas copies of
// each), every port picked free on 127.0.0.1, so it runs beside a `make up` stack.
type ownStack struct {
	dir      string
	cluster  *localcluster.Cluster
	nats     *server.Server
	binDir   string
	emuURL   string
	out      io.Writer
	replicas int

	mu    sync.Mutex
	procs map[string]*proc.Process // by replicaKey
	admin map[string]string        // by replicaKey
}

// replicaKey names a copy of a service: its name for replica 0, else <name>-<replica>. Its
// log is <key>.log, its pod name (the scheduler's Lease identity) <name>-soak[-<replica>].
func replicaKey(name string, replica int) string {
	if replica == 0 {
		return name
	}
	return name + "-" + strconv.Itoa(replica)
}

// podName is a copy's POD_NAME: the same across its restarts, as a container's.
func podName(name string, replica int) string {
	if replica == 0 {
		return name + "-soak"
	}
	return fmt.Sprintf("%s-soak-%d", name, replica)
}

// startOwnStack builds the binaries and starts everything under dir (logs in dir/logs), with
// replicas copies of every service (at least one).
func startOwnStack(ctx context.Context, root, dir string, out io.Writer, replicas int) (_ *ownStack, err error) {
	s := &ownStack{dir: dir, out: out, replicas: max(1, replicas), procs: map[string]*proc.Process{}, admin: map[string]string{}}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	s.binDir = filepath.Join(dir, "bin")
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	fmt.Fprintf(out, "soak: building the emulator and the services into %s\n", s.binDir)
	args := []string{"build", "-o", s.binDir + "/", "./tools/awsemu/cmd/awsemu"}
	for _, name := range services {
		args = append(args, "./services/"+name)
	}
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building: %w\n%s", err, b)
	}
	s.cluster, err = localcluster.Start(ctx, localcluster.Options{Dir: filepath.Join(dir, "cluster"), Out: out, Fresh: true})
	if err != nil {
		return nil, err
	}
	kubectl := func(args ...string) error {
		cmd := exec.CommandContext(ctx, s.cluster.Kubectl(), append([]string{"--kubeconfig", s.cluster.Kubeconfig}, args...)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl %v: %w: %s", args, err, b)
		}
		return nil
	}
	if err := kubectl("apply", "--server-side", "-k", filepath.Join(root, "deploy", "crds")); err != nil {
		return nil, err
	}
	if err := kubectl("wait", "--for", "condition=Established", "--timeout", "60s", "crd", "--all"); err != nil {
		return nil, err
	}
	if err := kubectl("create", "namespace", "fleetwright"); err != nil {
		return nil, err
	}
	s.nats, err = server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: filepath.Join(dir, "nats"), NoSigs: true, NoLog: true})
	if err != nil {
		return nil, fmt.Errorf("creating nats-server: %w", err)
	}
	go s.nats.Start()
	if !s.nats.ReadyForConnections(30 * time.Second) {
		return nil, errors.New("nats-server not ready after 30s")
	}
	emuAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s.emuURL = "http://" + emuAddr
	if err := s.start(ctx, "awsemu", "awsemu", "awsemu-soak", []string{"--listen", emuAddr, "--kubeconfig", s.cluster.Kubeconfig,
		"--cluster-name", "demo-cluster", "--region", "us-east-1", "--boot-delay", "0s", "--service-cidr", localcluster.ServiceCIDR}, s.emuURL+"/_emu/healthz"); err != nil {
		return nil, err
	}
	for _, name := range services {
		for r := 0; r < s.replicas; r++ {
			if err := s.startService(ctx, name, r); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// startService starts (or restarts) one copy of a service with the flags `make up` gives it,
// the terminator's tightened (see ownGCGrace), and waits until it is ready.
func (s *ownStack) startService(ctx context.Context, name string, replica int) error {
	key := replicaKey(name, replica)
	s.mu.Lock()
	admin, ok := s.admin[key]
	s.mu.Unlock()
	if !ok {
		var err error
		if admin, err = freeAddr(); err != nil {
			return err
		}
		s.mu.Lock()
		s.admin[key] = admin
		s.mu.Unlock()
	}
	args := []string{"--kubeconfig", s.cluster.Kubeconfig, "--nats-url", s.nats.ClientURL(), "--admin-addr", admin}
	switch name {
	case "launcher":
		args = append(args, "--cluster-name", "demo-cluster", "--cluster-endpoint", s.cluster.Server, "--spot-price-modelled")
	case "terminator":
		args = append(args, "--cluster-name", "demo-cluster", "--decision-interval", "1s", "--sqs-wait", "2s",
			"--gc-grace", ownGCGrace.String(), "--gc-interval", ownGCInterval.String())
	}
	return s.start(ctx, key, name, podName(name, replica), args, "http://"+admin+"/readyz")
}

// start runs the binary bin as the process key (its log key.log) with POD_NAME pod.
func (s *ownStack) start(ctx context.Context, key, bin, pod string, args []string, health string) error {
	env := []string{
		"AWS_ENDPOINT_URL_EC2=" + s.emuURL, "AWS_ENDPOINT_URL_SQS=" + s.emuURL, "AWS_ENDPOINT_URL_IAM=" + s.emuURL,
		"AWS_ENDPOINT_URL_SSM=" + s.emuURL, "AWS_ENDPOINT_URL_EKS=" + s.emuURL, "AWS_ENDPOINT_URL_PRICING=" + s.emuURL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=soak", "AWS_SECRET_ACCESS_KEY=soak",
		"AWS_EC2_METADATA_DISABLED=true",
		// A restarted service is its pod's container restarting: the same pod name, so a
		// scheduler that comes back holds its Lease again at once.
		"POD_NAMESPACE=fleetwright", "POD_NAME=" + pod,
	}
	p, err := proc.Start(key, filepath.Join(s.binDir, bin), args, env, filepath.Join(s.dir, "logs"))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.procs[key] = p
	s.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	return proc.WaitFor(wctx, p, key, func(ctx context.Context) error { return proc.HTTPOK(ctx, nil, health, "") })
}

// kill ends one copy of a service with SIGKILL and starts it again at once, as its container
// would be: the scheduler's leader (the Lease's holder), else the copy pick chooses.
func (s *ownStack) kill(ctx context.Context, name string, pick uint64) (string, error) {
	replica, leader := int(pick%uint64(s.replicas)), false
	if name == subject.Scheduler && s.replicas > 1 {
		if r, ok := s.leader(ctx); ok {
			replica, leader = r, true
		}
	}
	key := replicaKey(name, replica)
	s.mu.Lock()
	p := s.procs[key]
	s.mu.Unlock()
	if p == nil {
		return "", fmt.Errorf("no service %q", key)
	}
	pid := p.Pid()
	t0 := time.Now()
	_ = syscall.Kill(pid, syscall.SIGKILL)
	_ = p.Stop(5 * time.Second) // reaps it
	if err := s.startService(ctx, name, replica); err != nil {
		return "", fmt.Errorf("restarting %s: %w", key, err)
	}
	what := key
	if leader {
		what += " (the leader)"
	}
	return fmt.Sprintf("%s (pid %d) killed -9, ready again in %s", what, pid, time.Since(t0).Round(10*time.Millisecond)), nil
}

// leader is the scheduler copy holding the Lease, if one does.
func (s *ownStack) leader(ctx context.Context) (int, bool) {
	kube, err := s.cluster.Client()
	if err != nil {
		return 0, false
	}
	lease, err := kube.CoordinationV1().Leases("fleetwright").Get(ctx, schedulerLease, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return 0, false
	}
	for r := 0; r < s.replicas; r++ {
		if *lease.Spec.HolderIdentity == podName(subject.Scheduler, r) {
			return r, true
		}
	}
	return 0, false
}

// schedulerLease is the Lease the scheduler's replicas compete for (services/scheduler).
const schedulerLease = "fleetwright-scheduler"

// Stop stops the services, the emulator, NATS and the control plane.
func (s *ownStack) Stop() {
	s.mu.Lock()
	procs := s.procs
	s.mu.Unlock()
	var keys []string
	for _, name := range services {
		for r := 0; r < s.replicas; r++ {
			keys = append(keys, replicaKey(name, r))
		}
	}
	for _, key := range append(keys, "awsemu") {
		if p := procs[key]; p != nil {
			_ = p.Stop(15 * time.Second)
		}
	}
	if s.nats != nil {
		s.nats.Shutdown()
		s.nats.WaitForShutdown()
	}
	if s.cluster != nil {
		if err := s.cluster.Stop(); err != nil {
			fmt.Fprintf(s.out, "soak: %v\n", err)
		}
	}
}

func (s *ownStack) target() (Target, error) {
	rc, err := s.cluster.RESTConfig()
	if err != nil {
		return Target{}, err
	}
	for _, u := range []string{rc.Host, s.emuURL, s.nats.ClientURL()} {
		if err := loopbackOnly(u); err != nil {
			return Target{}, err
		}
	}
	c, err := e2e.NewClient(rc)
	if err != nil {
		return Target{}, err
	}
	return Target{Client: c, Emu: emuclient.New(s.emuURL), Services: services, Kill: s.kill,
		GCWindow: ownGCGrace + ownGCInterval + restartAllowance}, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// The terminator's defaults, which `make up` runs it with: the orphan window follows them.
const (
	defaultGCGrace    = 2 * time.Minute
	defaultGCInterval = time.Minute
)

// runningStack is the `make up` stack at a state directory: its env file gives the URLs, and
// its supervisor restarts a killed service and records each service's pid under state/pids.
type runningStack struct {
	state string
	env   map[string]string
}

// supervisorAlive says whether a `make up` supervisor runs for the state directory.
func supervisorAlive(state string) bool {
	b, err := os.ReadFile(filepath.Join(state, "supervisor.pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && syscall.Kill(pid, 0) == nil
}

func openRunningStack(state string) (*runningStack, error) {
	path := filepath.Join(state, "env")
	env, err := e2e.ReadStackEnv(path)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"KUBECONFIG", "AWSEMU_ADMIN_URL"} {
		if env[k] == "" {
			return nil, fmt.Errorf("%s sets no %s: is it a `make up` env file?", path, k)
		}
	}
	return &runningStack{state: state, env: env}, nil
}

func (r *runningStack) target() (Target, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", r.env["KUBECONFIG"])
	if err != nil {
		return Target{}, fmt.Errorf("loading %s: %w", r.env["KUBECONFIG"], err)
	}
	emuURL := strings.TrimSuffix(strings.TrimSuffix(r.env["AWSEMU_ADMIN_URL"], "/"), "/_emu")
	for what, u := range map[string]string{"the apiserver (" + r.env["KUBECONFIG"] + ")": rc.Host, "AWSEMU_ADMIN_URL": emuURL, "NATS_URL": r.env["NATS_URL"]} {
		if err := loopbackOnly(u); err != nil {
			return Target{}, fmt.Errorf("%s: %w", what, err)
		}
	}
	var have []string
	for _, name := range services {
		if _, err := os.Stat(r.pidFile(name)); err == nil {
			have = append(have, name)
		}
	}
	if len(have) == 0 {
		return Target{}, fmt.Errorf("the running stack records no service pids in %s (a supervisor from before the soak, or no service built): `make down && make up`, or --own-stack",
			filepath.Join(r.state, "pids"))
	}
	c, err := e2e.NewClient(rc)
	if err != nil {
		return Target{}, err
	}
	return Target{Client: c, Emu: emuclient.New(emuURL), Services: have, Kill: r.kill,
		GCWindow: defaultGCGrace + defaultGCInterval + restartAllowance}, nil
}

func (r *runningStack) pidFile(name string) string {
	return filepath.Join(r.state, "pids", name+".pid")
}

// readPID reads "<pid> <health URL>" as the supervisor writes it.
func (r *runningStack) readPID(name string) (int, string, error) {
	b, err := os.ReadFile(r.pidFile(name))
	if err != nil {
		return 0, "", err
	}
	pidText, health, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		return 0, "", fmt.Errorf("%s: %w", r.pidFile(name), err)
	}
	return pid, health, nil
}

// kill sends SIGKILL to the service's pid (the `make up` stack runs one of each: pick is not
// needed) and waits until the supervisor has started it again and it is ready.
func (r *runningStack) kill(ctx context.Context, name string, _ uint64) (string, error) {
	pid, _, err := r.readPID(name)
	if err != nil {
		return "", err
	}
	t0 := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return "", fmt.Errorf("killing %s (pid %d): %w", name, pid, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = proc.WaitFor(wctx, nil, name+" restarted by the supervisor", func(ctx context.Context) error {
		now, health, err := r.readPID(name)
		if err != nil {
			return err
		}
		if now == pid {
			return errors.New("not restarted yet")
		}
		return proc.HTTPOK(ctx, nil, health, "")
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (pid %d) killed -9, restarted by the supervisor, ready in %s", name, pid, time.Since(t0).Round(10*time.Millisecond)), nil
}

// loopbackOnly refuses a URL whose host is not a loopback address: the soak kills processes
// and interrupts instances, and must never reach anything but a local stack.
func loopbackOnly(raw string) error {
	for _, one := range strings.Split(raw, ",") {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil || u.Host == "" {
			return fmt.Errorf("%q is not a URL with a host", one)
		}
		host := u.Hostname()
		if host == "localhost" {
			continue
		}
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("%q is not on a loopback address: the soak runs only against a local stack", one)
		}
	}
	return nil
}
