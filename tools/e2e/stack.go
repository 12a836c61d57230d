package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	ec2v1alpha1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1alpha1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	emuclient "github.com/fleetwright/fleetwright/tools/awsemu/client"
	"github.com/fleetwright/fleetwright/tools/localcluster"
	"github.com/fleetwright/fleetwright/tools/proc"
)

// Stack is the whole system for one test: its own control plane with the CRDs, an
// in-process nats-server, and the AWS emulator and Fleetwright's services each as a separate
// process, wired as `make up` wires them.
type Stack struct {
	t        testing.TB
	Cluster  *localcluster.Cluster
	NATSURL  string
	EmuURL   string
	Emu      *emuclient.Client
	Kube     kubernetes.Interface
	Client   client.Client // knows Karpenter's types
	services map[string]*Service
	ports    map[string]string
}

// Services are the service names in start order.
var Services = []string{"pod-watcher", "scheduler", "launcher"}

// NewStack starts a fresh stack with the given services (nil means Services).
func NewStack(t testing.TB, services []string) *Stack {
	t.Helper()
	if services == nil {
		services = Services
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

	s := &Stack{t: t, Cluster: c, NATSURL: bustest.RunServer(t).ClientURL(), services: map[string]*Service{}, ports: map[string]string{}}
	s.Kube, err = c.Client()
	require.NoError(t, err)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, ec2v1.AddToScheme, v1alpha5.AddToScheme, ec2v1alpha1.AddToScheme} {
		require.NoError(t, add(scheme))
	}
	rc, err := c.RESTConfig()
	require.NoError(t, err)
	// Its client logs through controller-runtime's logger; say nothing rather than warn that none is set.
	crlog.SetLogger(logr.Discard())
	s.Client, err = client.New(rc, client.Options{Scheme: scheme})
	require.NoError(t, err)

	emuAddr := FreeAddr(t)
	s.EmuURL = "http://" + emuAddr
	s.Emu = emuclient.New(s.EmuURL)
	emu := Start(t, "awsemu", Build(t, "./tools/awsemu/cmd/awsemu"), []string{"--listen", emuAddr, "--kubeconfig", c.Kubeconfig,
		"--cluster-name", "demo-cluster", "--boot-delay", "0s"}, nil)
	s.services["awsemu"] = emu
	s.waitHealthy("awsemu", func(ctx context.Context) error { return s.Emu.Healthy(ctx) })
	for _, name := range services {
		s.StartService(name)
	}
	if slices.Contains(services, "scheduler") {
		s.Leading()
	}
	return s
}

// Leading waits until the scheduler leads and has made its takeover (offered the pods already
// waiting), so a test's pods arrive through pod-watcher's batches.
func (s *Stack) Leading() {
	s.t.Helper()
	require.Eventually(s.t, func() bool { return strings.Contains(s.services["scheduler"].Log(), `"message":"leading; `) },
		time.Minute, 50*time.Millisecond, "the scheduler leads")
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
	admin, ok := s.ports[name]
	if !ok {
		admin = FreeAddr(s.t)
		s.ports[name] = admin
	}
	args := []string{"--kubeconfig", s.kubeconfigAs(name), "--nats-url", s.NATSURL, "--admin-addr", admin}
	switch name {
	case "scheduler":
		args = append(args, "--disruption-interval", "1s")
	case "launcher":
		args = append(args, "--cluster-name", "demo-cluster", "--spot-price-modelled")
	case "terminator":
		args = append(args, "--cluster-name", "demo-cluster", "--interval", "1s", "--sqs-wait", "2s",
			"--gc-grace", "30s", "--gc-interval", "5s")
	}
	env := []string{"AWS_ENDPOINT_URL_EC2=" + s.EmuURL, "AWS_ENDPOINT_URL_SQS=" + s.EmuURL, "AWS_ENDPOINT_URL_IAM=" + s.EmuURL, "AWS_ENDPOINT_URL_SSM=" + s.EmuURL, "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=x", "AWS_EC2_METADATA_DISABLED=true",
		// A restarted service is its pod's container restarting: the same pod name, so a
		// scheduler that comes back holds its Lease again at once.
		"POD_NAMESPACE=fleetwright", "POD_NAME=" + name + "-0"}
	env = append(env, extraEnv...)
	svc := Start(s.t, name, Build(s.t, "./services/"+name), args, env)
	s.services[name] = svc
	s.waitHealthy(name, func(ctx context.Context) error { return proc.HTTPOK(ctx, nil, "http://"+admin+"/readyz", "") })
	return svc
}

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
