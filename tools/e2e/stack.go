package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/subject"
	emuclient "github.com/fleetwright/fleetwright/tools/awsemu/client"
	"github.com/fleetwright/fleetwright/tools/localcluster"
	"github.com/fleetwright/fleetwright/tools/proc"
)

// Stack is the whole system for one test: its own control plane with the CRDs, an
// in-process nats-server, and the AWS emulator and Fleetwright's services each as a separate
// process, wired as `make up` wires them.
type Stack struct {
	t       testing.TB
	Cluster *localcluster.Cluster
	// NATSURL is every NATS server's client URL, comma separated (one unless Options.NATSCluster).
	NATSURL string
	// NATS are the in-process nats-servers; RestartNATS replaces one.
	NATS     []*server.Server
	EmuURL   string
	Emu      *emuclient.Client
	Kube     kubernetes.Interface
	Client   client.Client // knows Karpenter's types
	services map[string]*Service
	ports    map[string]string
	opt      Options
	claimLog *ClaimLog
	// Jaeger is the stack's Jaeger when Options.Jaeger asked for one.
	Jaeger *localcluster.Jaeger
}

// Options change how NewStackWith builds a stack.
type Options struct {
	// Services to start, in order; nil means Services.
	Services []string
	// NATSCluster, when above 1, runs that many nats-servers as one JetStream cluster, and the
	// services create every stream with that many replicas (3: the R3 streams deploy/ runs).
	NATSCluster int
	// ServiceArgs are extra flags for a service, by name (after the stack's own).
	ServiceArgs map[string][]string
	// BootDelay is how long the emulator's instances take from pending to running (and their
	// nodes to register); 0: at once. EC2's take tens of seconds: disruption, recovery and
	// idempotency tests run with 30 s or more.
	BootDelay time.Duration
	// Region is the emulated AWS region, whose zones and prices the services see; "" is
	// us-east-1. The emulator's spot prices hold still (--steady-spot-prices), so that a test
	// can price a plan as the scheduler did (Stack.OnDemandPrice, Stack.SpotPrice).
	Region string
	// Jaeger runs a Jaeger (built once into the cache, as make up's) and points the services'
	// traces at it: Stack.Jaeger has its URL for the HTTP API.
	Jaeger bool
}

// Services are the service names in start order.
var Services = []string{"pod-watcher", "scheduler", "launcher"}

// NewStack starts a fresh stack with the given services (nil means Services).
func NewStack(t testing.TB, services []string) *Stack {
	t.Helper()
	return NewStackWith(t, Options{Services: services})
}

// NewStackWith starts a fresh stack as opt says.
func NewStackWith(t testing.TB, opt Options) *Stack {
	t.Helper()
	services := opt.Services
	if services == nil {
		services = Services
	}
	if opt.Jaeger {
		// Built once into the cache (make cluster-bin builds it too): a cold build takes 10 to 40
		// minutes on 2 cores, as busy as they are.
		bctx, bcancel := context.WithTimeout(context.Background(), time.Hour)
		_, err := localcluster.EnsureJaeger(bctx, os.Stderr)
		bcancel()
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "fleetwright-stack-")
	require.NoError(t, err)
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, Out: os.Stderr})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Stop()
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("control plane logs kept in %s", c.LogDir)
		}
	})
	_, err = Kubectl(c, "apply", "--server-side", "-k", filepath.Join(Root(t), "deploy", "crds"))
	require.NoError(t, err)
	_, err = Kubectl(c, "wait", "--for", "condition=Established", "--timeout", "60s", "crd", "--all")
	require.NoError(t, err)
	_, err = Kubectl(c, "create", "namespace", "fleetwright")
	require.NoError(t, err)
	// Each service runs as its ServiceAccount, with the RBAC deploy/ ships: a permission the
	// code needs and the manifests lack fails here, not on a user's cluster.
	for _, svc := range []string{"pod-watcher", "scheduler", "launcher", "terminator"} {
		for _, f := range []string{"serviceaccount.yaml", "rbac.yaml"} {
			_, err = Kubectl(c, "apply", "-n", "fleetwright", "-f", filepath.Join(Root(t), "deploy", "base", svc, f))
			require.NoError(t, err)
		}
	}
	// And the API server fences the scheduler's writes by its Lease, as deployed.
	_, err = Kubectl(c, "apply", "-f", filepath.Join(Root(t), "deploy", "base", "scheduler", "fence.yaml"))
	require.NoError(t, err)

	s := &Stack{t: t, Cluster: c, services: map[string]*Service{}, ports: map[string]string{}, opt: opt}
	if opt.NATSCluster > 1 {
		s.NATS = bustest.RunCluster(t, opt.NATSCluster)
	} else {
		s.NATS = []*server.Server{bustest.RunServer(t)}
	}
	var urls []string
	for _, srv := range s.NATS {
		urls = append(urls, srv.ClientURL())
	}
	s.NATSURL = strings.Join(urls, ",")
	s.Kube, err = c.Client()
	require.NoError(t, err)
	rc, err := c.RESTConfig()
	require.NoError(t, err)
	s.Client, err = NewClient(rc)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpState() // after the services' logs (cleanups run last first), before the cluster stops
		}
	})
	dyn, err := dynamic.NewForConfig(rc)
	require.NoError(t, err)
	watchCtx, stopWatch := context.WithCancel(context.Background())
	s.claimLog = watchClaims(watchCtx, dyn)
	// Every test ends with no pod pending while nodes launched for it keep coming up without it.
	t.Cleanup(func() {
		if !t.Failed() {
			s.assertNoLaunchLoop(t)
		}
		stopWatch()
	})

	if opt.Jaeger {
		s.Jaeger, err = localcluster.StartJaeger(ctx, localcluster.JaegerOptions{Dir: dir, Out: os.Stderr})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Jaeger.Stop(5 * time.Second) })
	}

	emuAddr := FreeAddr(t)
	s.EmuURL = "http://" + emuAddr
	s.Emu = emuclient.New(s.EmuURL)
	emu := Start(t, "awsemu", Build(t, "./tools/awsemu/cmd/awsemu"), []string{"--listen", emuAddr, "--kubeconfig", c.Kubeconfig,
		"--cluster-name", "demo-cluster", "--boot-delay", opt.BootDelay.String(), "--service-cidr", localcluster.ServiceCIDR,
		"--region", s.Region(), "--steady-spot-prices"}, nil)
	s.services["awsemu"] = emu
	s.waitHealthy("awsemu", func(ctx context.Context) error { return s.Emu.Healthy(ctx) })
	// Each service creates only the streams it owns and waits, not ready, for the others it
	// uses. A stack without some service makes that service's streams itself, as it would have;
	// the services start owners first, each ready before the next.
	s.ensureStreamsOfAbsent(services)
	for _, name := range startOrder {
		if slices.Contains(services, name) {
			s.StartService(name)
		}
	}
	if slices.Contains(services, "scheduler") {
		s.Leading()
	}
	return s
}

// Region is the stack's emulated AWS region.
func (s *Stack) Region() string {
	if s.opt.Region == "" {
		return "us-east-1"
	}
	return s.opt.Region
}

// OnDemandPrice is a type's on-demand price in the stack's region, as the launcher publishes it
// (the emulator's Pricing API serves the embedded per-region table).
func (s *Stack) OnDemandPrice(name string) float64 {
	p, ok := catalog.OnDemandPrice(s.Region(), name)
	require.True(s.t, ok, "%s has an on-demand price in %s", name, s.Region())
	return p
}

// SpotPrice is a type's spot price in a zone of the stack's region, as the emulator's spot
// price history gives it (held still: step 0 of the model).
func (s *Stack) SpotPrice(name, zone string) float64 {
	p, ok := catalog.ModelledSpotPrice(s.Region(), name, zone, 0)
	require.True(s.t, ok, "%s has a spot price in %s", name, zone)
	return p
}

// startOrder starts each service after the owners of the streams it uses (pkg/subject's
// stream owners): a service waits, not ready, until those exist.
var startOrder = []string{subject.PodWatcher, subject.Launcher, subject.Terminator, subject.Scheduler}

// ensureStreamsOfAbsent creates the streams whose owners are not among services.
func (s *Stack) ensureStreamsOfAbsent(services []string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.Config{URL: s.NATSURL, Name: "e2e-stack", Registerer: prometheus.NewRegistry(),
		StreamReplicas: max(1, s.opt.NATSCluster)})
	require.NoError(s.t, err)
	defer conn.Close()
	for _, owner := range startOrder {
		if !slices.Contains(services, owner) {
			require.NoError(s.t, conn.EnsureOwnStreams(ctx, owner), "making the streams of the absent %s", owner)
		}
	}
}

// Leading waits until the scheduler leads and has made its takeover (offered the pods already
// waiting), so a test's pods arrive through pod-watcher's batches.
func (s *Stack) Leading() {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		for key, svc := range s.services {
			if (key == "scheduler" || strings.HasPrefix(key, "scheduler-")) && strings.Contains(svc.Log(), `"message":"leading; `) {
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond, "the scheduler leads")
}

// RestartNATS shuts NATS server i down and starts it again on the same ports with the same
// store (a cluster node rejoins its cluster), as a rolling restart of NATS does; the services
// reconnect by themselves. It returns once the server takes connections again.
func (s *Stack) RestartNATS(i int) {
	s.t.Helper()
	s.NATS[i] = bustest.Restart(s.t, s.NATS[i])
}

// ReplicaOptions say how StartReplica runs one copy of a service.
type ReplicaOptions struct {
	// Replica numbers the copy: its pod name is <service>-<Replica>, its admin port its own.
	// Replica 0 is the copy StartService runs.
	Replica int
	// KubeServer, when set, is the URL the copy reaches the kube-apiserver at instead of the
	// cluster's own (a LeaseDelayProxy's URL).
	KubeServer string
	// Env is extra environment (KEY=value) for this start only, e.g. a fault point armed.
	Env []string
}

// replicaKey names a copy in the stack's maps: the service name for replica 0, else
// <service>-<replica>.
func replicaKey(name string, replica int) string {
	if replica == 0 {
		return name
	}
	return fmt.Sprintf("%s-%d", name, replica)
}

// StartService starts (or restarts) a service and waits until its /readyz answers 200.
func (s *Stack) StartService(name string) *Service {
	s.t.Helper()
	return s.StartServiceEnv(name)
}

// StartServiceEnv is StartService with extra environment (KEY=value) for this start only,
// e.g. faultpoint.Env to arm a fault point.
func (s *Stack) StartServiceEnv(name string, extraEnv ...string) *Service {
	s.t.Helper()
	return s.StartReplica(name, ReplicaOptions{Env: extraEnv})
}

// Replica returns a running copy of a service (Replica(name, 0) is Service(name)).
func (s *Stack) Replica(name string, replica int) *Service {
	return s.services[replicaKey(name, replica)]
}

// AdminAddr is the admin address (host:port: /metrics, /readyz) of a copy of a service.
func (s *Stack) AdminAddr(name string, replica int) string { return s.ports[replicaKey(name, replica)] }

// StartReplica starts (or restarts) one copy of a service and waits until its /readyz answers
// 200. Copies of one service share everything but their pod name and admin port.
func (s *Stack) StartReplica(name string, o ReplicaOptions) *Service {
	s.t.Helper()
	key := replicaKey(name, o.Replica)
	admin, ok := s.ports[key]
	if !ok {
		admin = FreeAddr(s.t)
		s.ports[key] = admin
	}
	kubeconfig := s.kubeconfigAs(name)
	if o.KubeServer != "" {
		kubeconfig = s.kubeconfigVia(name, key, o.KubeServer)
	}
	args := []string{"--kubeconfig", kubeconfig, "--nats-url", s.NATSURL, "--admin-addr", admin}
	if s.opt.NATSCluster > 1 {
		args = append(args, "--nats-stream-replicas", strconv.Itoa(s.opt.NATSCluster))
	}
	switch name {
	case "scheduler":
		args = append(args, "--disruption-interval", "1s")
	case "launcher":
		args = append(args, "--cluster-name", "demo-cluster", "--spot-price-modelled")
	case "terminator":
		args = append(args, "--cluster-name", "demo-cluster", "--decision-interval", "1s", "--sqs-wait", "2s",
			"--gc-grace", "30s", "--gc-interval", "5s")
	}
	args = append(args, s.opt.ServiceArgs[name]...)
	env := []string{"AWS_ENDPOINT_URL_EC2=" + s.EmuURL, "AWS_ENDPOINT_URL_SQS=" + s.EmuURL, "AWS_ENDPOINT_URL_IAM=" + s.EmuURL, "AWS_ENDPOINT_URL_SSM=" + s.EmuURL,
		"AWS_ENDPOINT_URL_EKS=" + s.EmuURL, "AWS_ENDPOINT_URL_PRICING=" + s.EmuURL, "AWS_REGION=" + s.Region(),
		"AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=x", "AWS_EC2_METADATA_DISABLED=true",
		// A restarted service is its pod's container restarting: the same pod name, so a
		// scheduler that comes back holds its Lease again at once.
		"POD_NAMESPACE=fleetwright", fmt.Sprintf("POD_NAME=%s-%d", name, o.Replica)}
	if s.Jaeger != nil {
		// Export every 200 ms rather than 5 s, so a test finds its spans soon.
		env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+s.Jaeger.OTLPEndpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_BSP_SCHEDULE_DELAY=200")
	}
	env = append(env, o.Env...)
	svc := Start(s.t, key, Build(s.t, "./services/"+name), args, env)
	s.services[key] = svc
	s.waitHealthy(key, func(ctx context.Context) error { return proc.HTTPOK(ctx, nil, "http://"+admin+"/readyz", "") })
	return svc
}

// AdminURL is a started service's admin base URL (http://host:port: /metrics, /readyz).
func (s *Stack) AdminURL(name string) string { return "http://" + s.ports[name] }

// Service returns a running service by name.
func (s *Stack) Service(name string) *Service { return s.services[name] }

// Apply applies a manifest (a path relative to the repository root, or absolute).
func (s *Stack) Apply(path string) {
	s.t.Helper()
	if !filepath.IsAbs(path) {
		path = filepath.Join(Root(s.t), path)
	}
	_, err := Kubectl(s.Cluster, "apply", "-f", path)
	require.NoError(s.t, err)
}

// Kubectl runs kubectl against the stack's cluster.
func (s *Stack) Kubectl(args ...string) string {
	s.t.Helper()
	out, err := Kubectl(s.Cluster, args...)
	require.NoError(s.t, err)
	return out
}

func (s *Stack) waitHealthy(name string, check func(context.Context) error) {
	s.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return
		}
		if svc := s.services[name]; svc != nil && !svc.Running() {
			svc.DumpLog()
			s.t.Fatalf("%s exited: %v", name, svc.ExitError())
		}
		if time.Now().After(deadline) {
			if svc := s.services[name]; svc != nil {
				svc.DumpLog()
			}
			s.t.Fatalf("%s not ready after 90s: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kubeconfigAs is a kubeconfig for the control plane that acts as the service's ServiceAccount
// (impersonation), so the service has exactly the permissions deploy/ grants it.
func (s *Stack) kubeconfigAs(service string) string {
	s.t.Helper()
	path := filepath.Join(filepath.Dir(s.Cluster.Kubeconfig), "kubeconfig-"+service)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	cfg, err := clientcmd.LoadFromFile(s.Cluster.Kubeconfig)
	require.NoError(s.t, err)
	for _, user := range cfg.AuthInfos {
		user.Impersonate = "system:serviceaccount:fleetwright:" + service
	}
	require.NoError(s.t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// kubeconfigVia is kubeconfigAs with the server replaced by server (plain HTTP: a proxy on
// loopback that forwards to the kube-apiserver with the cluster's credentials).
func (s *Stack) kubeconfigVia(service, key, server string) string {
	s.t.Helper()
	path := filepath.Join(filepath.Dir(s.Cluster.Kubeconfig), "kubeconfig-via-"+key)
	cfg, err := clientcmd.LoadFromFile(s.kubeconfigAs(service))
	require.NoError(s.t, err)
	for _, c := range cfg.Clusters {
		c.Server = server
		c.CertificateAuthority, c.CertificateAuthorityData, c.InsecureSkipTLSVerify = "", nil, false
	}
	require.NoError(s.t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// NodeClaims lists the stack's NodeClaims.
func (s *Stack) NodeClaims(t testing.TB) []karpv1.NodeClaim {
	t.Helper()
	var list karpv1.NodeClaimList
	require.NoError(t, s.Client.List(context.Background(), &list))
	return list.Items
}

// ClaimLog is every NodeClaim the stack has had, as last seen.
func (s *Stack) ClaimLog() *ClaimLog { return s.claimLog }

// Calls counts the emulator's answered calls of an action.
func (s *Stack) Calls(t testing.TB, action string) int {
	t.Helper()
	calls, err := s.Emu.Calls(context.Background())
	require.NoError(t, err)
	n := 0
	for _, c := range calls {
		if c.Action == action {
			n++
		}
	}
	return n
}
