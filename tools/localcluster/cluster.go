// Package localcluster runs a real Kubernetes control plane on loopback, with no Docker:
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from pinned Go modules
// (modules/), plus kwok playing the kubelet of every Node annotated kwok.x-k8s.io/node=fake.
//
//	EnsureBinaries ──> BinDir (~/.cache/fleetwright/localcluster/<versions>/bin, built once)
//	Start ──> etcd ──> kube-apiserver (self-signed TLS, token auth, RBAC) ──> kubeconfig
//	             ──> kube-controller-manager, kube-scheduler (healthz) ──> kwok
//	Stop  ──> SIGTERM in reverse order, SIGKILL after a grace period; children also die with
//	          their parent (Pdeathsig), so nothing is left running.
//
// Tests get a shared cluster from the clustertest package; `make up` runs one through tools/stack.
package localcluster

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetwright/fleetwright/tools/proc"
)

// ServiceCIDR is the control plane's service range (kube-apiserver --service-cluster-ip-range):
// what EKS DescribeCluster would report as the cluster's serviceIpv4Cidr, so the stacks start the
// AWS emulator with it and the launcher discovers it as on EKS.
const ServiceCIDR = "10.0.0.0/24"

// SchedulerQPS is kube-scheduler's client QPS (burst twice that).
const SchedulerQPS = 500

// Options configure Start.
type Options struct {
	// Dir holds data, certificates, logs and the kubeconfig. Created if missing; Start wipes
	// nothing in it except etcd's data when Fresh is set.
	Dir string
	// Out receives progress lines (building, starting, ready). Nil discards them.
	Out io.Writer
	// APIServerPort pins the apiserver's port; 0 picks a free one.
	APIServerPort int
	// Fresh discards etcd data from an earlier run in Dir.
	Fresh bool
}

// Cluster is a running control plane.
type Cluster struct {
	Dir        string // working directory
	LogDir     string // one <component>.log per process
	Kubeconfig string // path of an admin kubeconfig
	Server     string // https://127.0.0.1:<port>
	Token      string // admin bearer token (group system:masters)
	BinDir     string // where etcd, kube-*, kubectl and kwok live

	procs []*proc.Process
	out   io.Writer
	// apiserver is the kube-apiserver's index in procs and the arguments it was started
	// with, for RestartAPIServer.
	apiserver     int
	apiserverArgs []string
	apiserverWait func(context.Context, *proc.Process) error
}

// Start builds missing binaries, starts every component and waits until the API is ready and
// the controller manager and scheduler report healthy. On error everything started is stopped.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	binDir, err := EnsureBinaries(ctx, out)
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, errors.New("starting local cluster: Options.Dir is required")
	}
	c := &Cluster{Dir: opts.Dir, LogDir: filepath.Join(opts.Dir, "logs"), BinDir: binDir, out: out,
		Kubeconfig: filepath.Join(opts.Dir, "kubeconfig")}
	if opts.Fresh {
		_ = os.RemoveAll(filepath.Join(opts.Dir, "etcd"))
	}
	for _, d := range []string{c.LogDir, filepath.Join(opts.Dir, "pki"), filepath.Join(opts.Dir, "etcd")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	started := time.Now()
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, cmPort, schedPort := ports[0], ports[1], ports[2], ports[3]
	apiPort := ports[4]
	if opts.APIServerPort != 0 {
		apiPort = opts.APIServerPort
	}
	err = c.startEtcd(ctx, etcdPort, peerPort)
	for try := 1; err != nil && try < 3 && ctx.Err() == nil && len(c.procs) == 1 && !c.procs[0].Running(); try++ {
		// A port picked free can be taken before etcd binds it (see startControllers). etcd
		// binds its listeners before it writes its data directory, so it starts again cleanly.
		var more []int
		if more, err = freePorts(2); err != nil {
			return nil, err
		}
		etcdPort, peerPort = more[0], more[1]
		fmt.Fprintf(out, "localcluster: etcd exited before it was ready; starting it again on ports %d and %d\n", etcdPort, peerPort)
		c.procs = c.procs[:0]
		err = c.startEtcd(ctx, etcdPort, peerPort)
	}
	if err != nil {
		return nil, err
	}
	saKey, saPub, err := c.startAPIServer(ctx, etcdPort, apiPort)
	for try := 1; err != nil && opts.APIServerPort == 0 && try < 3 && ctx.Err() == nil && c.apiserverExited(); try++ {
		// A port picked free can be taken before the component binds it (see startControllers).
		var more []int
		if more, err = freePorts(1); err != nil {
			return nil, err
		}
		apiPort = more[0]
		fmt.Fprintf(out, "localcluster: kube-apiserver exited before it was ready; starting it again on port %d\n", apiPort)
		c.procs = c.procs[:c.apiserver]
		saKey, saPub, err = c.startAPIServer(ctx, etcdPort, apiPort)
	}
	if err != nil {
		return nil, err
	}
	if err := c.startControllers(ctx, saKey, saPub, cmPort, schedPort); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "localcluster: control plane ready at %s in %s (kubeconfig %s)\n", c.Server, time.Since(started).Round(100*time.Millisecond), c.Kubeconfig)
	return c, nil
}

func (c *Cluster) startEtcd(ctx context.Context, port, peerPort int) error {
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	p, err := proc.Start(Etcd, filepath.Join(c.BinDir, Etcd), []string{
		"--data-dir", filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls", url, "--advertise-client-urls", url,
		"--listen-peer-urls", "http://127.0.0.1:" + strconv.Itoa(peerPort),
		"--initial-advertise-peer-urls", "http://127.0.0.1:" + strconv.Itoa(peerPort),
		"--initial-cluster", "default=http://127.0.0.1:" + strconv.Itoa(peerPort),
		"--quota-backend-bytes", strconv.Itoa(2 << 30),
		"--log-level", "warn",
	}, nil, c.LogDir)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return proc.WaitFor(wctx, p, "etcd", proc.ServedBy(p, port, func(ctx context.Context) error { return proc.HTTPOK(ctx, nil, url+"/health", "") }))
}

func (c *Cluster) startAPIServer(ctx context.Context, etcdPort, port int) (string, string, error) {
	pki := filepath.Join(c.Dir, "pki")
	saKey, saPub, err := writeServiceAccountKeys(pki)
	if err != nil {
		return "", "", err
	}
	tokenFile, token, err := writeTokenFile(pki)
	if err != nil {
		return "", "", err
	}
	c.Token = token
	c.Server = "https://127.0.0.1:" + strconv.Itoa(port)
	c.apiserverArgs = []string{
		"--etcd-servers", "http://127.0.0.1:" + strconv.Itoa(etcdPort),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--cert-dir", pki,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", saPub,
		"--service-account-signing-key-file", saKey,
		"--token-auth-file", tokenFile,
		"--authorization-mode", "RBAC",
		"--service-cluster-ip-range", ServiceCIDR,
		"--allow-privileged",
		"--disable-admission-plugins", "ServiceAccount",
		"--v", "1",
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	c.apiserverWait = func(ctx context.Context, p *proc.Process) error {
		wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		// /readyz turns ok only once the post-start hooks (RBAC bootstrap roles, priority
		// classes) have run, so clients can rely on them from here on.
		return proc.WaitFor(wctx, p, "kube-apiserver /readyz", proc.ServedBy(p, port, func(ctx context.Context) error {
			return proc.HTTPOK(ctx, insecure, c.Server+"/readyz", token)
		}))
	}
	p, err := proc.Start(KubeAPIServer, filepath.Join(c.BinDir, KubeAPIServer), c.apiserverArgs, nil, c.LogDir)
	if err != nil {
		return "", "", err
	}
	c.apiserver = len(c.procs)
	c.procs = append(c.procs, p)
	if err := c.apiserverWait(ctx, p); err != nil {
		return "", "", err
	}
	if err := c.writeKubeconfig(filepath.Join(pki, "apiserver.crt")); err != nil {
		return "", "", err
	}
	return saKey, saPub, nil
}

func (c *Cluster) writeKubeconfig(caPath string) error {
	ca, err := os.ReadFile(caPath)
	if err != nil {
		return fmt.Errorf("reading apiserver certificate: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["fleetwright-local"] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.Token}
	cfg.Contexts["fleetwright-local"] = &clientcmdapi.Context{Cluster: "fleetwright-local", AuthInfo: "admin"}
	cfg.CurrentContext = "fleetwright-local"
	if err := clientcmd.WriteToFile(*cfg, c.Kubeconfig); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

// NodeMonitorGracePeriod is how long kube-controller-manager lets a node go without a
// heartbeat (its Lease or its status) before it marks the node NotReady and its pods NotReady
// (Kubernetes' default).
const NodeMonitorGracePeriod = 40 * time.Second

func (c *Cluster) startControllers(ctx context.Context, saKey, saPub string, cmPort, schedPort int) error {
	_ = saPub
	pki := filepath.Join(c.Dir, "pki")
	type component struct {
		name string
		port int
		args func(port int) []string
	}
	components := []component{
		{KubeControllerManager, cmPort, func(port int) []string {
			return []string{
				"--kubeconfig", c.Kubeconfig, "--leader-elect=false",
				"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
				"--cert-dir", filepath.Join(pki, "kcm"),
				"--controllers", "*,-serviceaccount-token,-bootstrapsigner,-tokencleaner",
				"--service-account-private-key-file", saKey,
				"--root-ca-file", filepath.Join(pki, "apiserver.crt"),
				"--node-monitor-grace-period", NodeMonitorGracePeriod.String(),
			}
		}},
		{KubeScheduler, schedPort, func(port int) []string {
			return []string{
				"--kubeconfig", c.Kubeconfig, "--leader-elect=false",
				"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
				"--cert-dir", filepath.Join(pki, "scheduler"),
				// At its default (50 QPS) kube-scheduler needs 40 s to bind 1,000 pods (a
				// binding and an event each), whoever made the nodes; sized as a large
				// cluster's control plane is, it is not the limit a scale test measures.
				"--kube-api-qps", strconv.Itoa(SchedulerQPS), "--kube-api-burst", strconv.Itoa(2 * SchedulerQPS),
			}
		}},
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	var waits []func() error
	for _, comp := range components {
		p, err := proc.Start(comp.name, filepath.Join(c.BinDir, comp.name), comp.args(comp.port), nil, c.LogDir)
		if err != nil {
			return err
		}
		slot := len(c.procs)
		c.procs = append(c.procs, p)
		waits = append(waits, func() error {
			// The port was free when it was picked but was released before the component bound
			// it, so another process (a parallel test's stack, a service's admin port) can take
			// it in between: a component that exits before it is healthy gets a new port. The
			// check counts only the component's own answer: another stack's controller on the
			// port answers /healthz too.
			port := comp.port
			for try := 1; ; try++ {
				url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
				wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
				err := proc.WaitFor(wctx, p, p.Name+" /healthz", proc.ServedBy(p, port, func(ctx context.Context) error { return proc.HTTPOK(ctx, insecure, url, "") }))
				cancel()
				if err == nil || p.Running() || ctx.Err() != nil || try == 3 {
					return err
				}
				ports, perr := freePorts(1)
				if perr != nil {
					return errors.Join(err, perr)
				}
				port = ports[0]
				fmt.Fprintf(c.out, "localcluster: %v; starting it again on port %d\n", err, port)
				if p, err = proc.Start(comp.name, filepath.Join(c.BinDir, comp.name), comp.args(port), nil, c.LogDir); err != nil {
					return err
				}
				c.procs[slot] = p
			}
		})
	}
	stages := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o644); err != nil {
		return fmt.Errorf("writing kwok's stages: %w", err)
	}
	kwok, err := proc.Start(Kwok, filepath.Join(c.BinDir, Kwok), []string{
		"--kubeconfig", c.Kubeconfig,
		"--config", stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
		"--cidr", "10.0.0.1/24", "--node-ip", "10.0.0.1",
		// Heartbeat as a kubelet does: renew each node's Lease (every quarter of its duration).
		// Without it kwok only rewrites node status every 20–45 s, past the controller
		// manager's grace period: it then marks every pod NotReady, and kwok never sets them
		// Ready again.
		"--node-lease-duration-seconds", strconv.Itoa(int(NodeMonitorGracePeriod / time.Second)),
	}, nil, c.LogDir)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, kwok)
	for _, w := range waits {
		if err := w(); err != nil {
			return err
		}
	}
	if !kwok.Running() {
		return kwok.ExitError()
	}
	return nil
}

// kwokStages are the stages kwok moves pods through: its own, and a pod that is never Ready.
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// apiserverExited reports whether a kube-apiserver was started and has exited.
func (c *Cluster) apiserverExited() bool {
	return c.apiserver > 0 && c.apiserver < len(c.procs) && !c.procs[c.apiserver].Running()
}

// RestartAPIServer stops the kube-apiserver (SIGTERM; SIGKILL after grace, 0 for SIGKILL at
// once) and starts it again on the same port, with the same etcd, certificates and tokens, as
// a control-plane upgrade or crash would; it returns once /readyz answers again. Clients keep
// their configuration: the kubeconfig does not change.
func (c *Cluster) RestartAPIServer(ctx context.Context, grace time.Duration) error {
	if c.apiserverArgs == nil {
		return errors.New("restarting kube-apiserver: it was never started")
	}
	old := c.procs[c.apiserver]
	if err := old.Stop(grace); err != nil {
		return fmt.Errorf("stopping kube-apiserver: %w", err)
	}
	fmt.Fprintf(c.out, "localcluster: kube-apiserver stopped; starting it again\n")
	// The port was just freed; a start racing the kernel's release fails to bind, so try a few
	// times.
	var err error
	for try := 0; try < 5; try++ {
		var p *proc.Process
		p, err = proc.Start(KubeAPIServer, filepath.Join(c.BinDir, KubeAPIServer), c.apiserverArgs, nil, c.LogDir)
		if err != nil {
			return err
		}
		c.procs[c.apiserver] = p
		if err = c.apiserverWait(ctx, p); err == nil || ctx.Err() != nil || p.Running() {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
}

// RESTConfig returns an admin client configuration for the cluster.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", c.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// Client returns an admin clientset.
func (c *Cluster) Client() (kubernetes.Interface, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// Kubectl is the path of the kubectl built with the control plane.
func (c *Cluster) Kubectl() string { return filepath.Join(c.BinDir, Kubectl) }

// Healthy returns the first component that has exited, as an error.
func (c *Cluster) Healthy() error {
	for _, p := range c.procs {
		if !p.Running() {
			return p.ExitError()
		}
	}
	return nil
}

// Stop terminates every component in reverse start order. It is safe to call twice.
func (c *Cluster) Stop() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		if err := c.procs[i].Stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
