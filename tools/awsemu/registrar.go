package awsemu

import (
	"context"
	"fmt"
	"hash/fnv"
	"log"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// NodeSpec is what the registrar needs to register an instance's Node.
type NodeSpec struct {
	Name         string // the private DNS name, as the kubelet and the AWS cloud controller name it
	InstanceID   string
	Type         catalog.InstanceType
	Zone, ZoneID string
	Region       string
	CapacityType string
	PrivateIP    string
	Labels       map[string]string // from user data
	Taints       []corev1.Taint    // from user data
	// Settings is what decides its capacity beyond the type: the kubelet settings and
	// instance-store policy of its user data, its template's volumes; nil: the defaults.
	Settings *scheduling.NodeSettings
	// Overhead is reserved beyond what Settings say (Emulator.SetNodeOverhead): the node
	// registers that much less allocatable.
	Overhead corev1.ResourceList
}

// nodeSpec describes the Node an instance registers; user data that cannot be read gives a
// Node without the extra labels and taints, and is logged.
func (e *Emulator) nodeSpec(inst *instance) NodeSpec {
	t, _ := e.world.instanceType(inst.Type)
	s, _ := e.world.subnetByID(inst.SubnetID)
	spec := NodeSpec{Name: inst.PrivateDNS, InstanceID: inst.ID, Type: t, Zone: inst.Zone, ZoneID: s.ZoneID,
		Region: e.cfg.Region, CapacityType: inst.CapacityType, PrivateIP: inst.PrivateIP, Overhead: e.nodeOverhead.DeepCopy()}
	ud, err := decodeUserData(inst.UserData)
	if err == nil {
		var ks kubeletSettings
		ks, err = parseKubeletSettings(ud)
		spec.Labels, spec.Taints = ks.Labels, ks.Taints
		ns := nodeSettings(ks.Registration, inst.BlockDevices)
		spec.Settings = &ns
		if verr := ns.Validate(); verr != nil {
			// A kubelet would not start with these settings; the node registers as if none.
			log.Printf("awsemu: instance %s: kubelet settings: %v", inst.ID, verr)
			spec.Settings = nil
		}
	}
	if err != nil {
		log.Printf("awsemu: instance %s: reading user data: %v", inst.ID, err)
	}
	return spec
}

// Node builds the Node a kubelet on this instance registers, with the AWS cloud controller's
// labels and providerID, the EBS CSI driver's zone label (as an EKS node with the driver has),
// catalog-derived capacity and allocatable, and kwok's annotation.
func (s NodeSpec) Node() *corev1.Node {
	t := s.Type
	arch := t.Arch
	labels := map[string]string{
		corev1.LabelHostname:                s.Name,
		corev1.LabelArchStable:              arch,
		corev1.LabelOSStable:                "linux",
		"beta.kubernetes.io/arch":           arch,
		"beta.kubernetes.io/os":             "linux",
		corev1.LabelInstanceTypeStable:      t.Name,
		corev1.LabelInstanceType:            t.Name,
		corev1.LabelTopologyZone:            s.Zone,
		corev1.LabelTopologyRegion:          s.Region,
		corev1.LabelFailureDomainBetaZone:   s.Zone,
		corev1.LabelFailureDomainBetaRegion: s.Region,
		"topology.k8s.aws/zone-id":          s.ZoneID,
		"topology.ebs.csi.aws.com/zone":     s.Zone,
	}
	for k, v := range s.Labels {
		labels[k] = v
	}
	// The node registers what the scheduler planned with: one function for both.
	ns := scheduling.DefaultNodeSettings()
	if s.Settings != nil {
		ns = *s.Settings
	}
	c, a, err := scheduling.NodeResources(t, ns)
	if err != nil {
		c, a, _ = scheduling.NodeResources(t, scheduling.DefaultNodeSettings())
	}
	capacity, allocatable := podproj.KubeResources(c), podproj.KubeResources(a)
	for name, q := range s.Overhead {
		if cur, ok := allocatable[name]; ok {
			cur.Sub(q)
			if cur.Sign() < 0 {
				cur.Set(0)
			}
			allocatable[name] = cur
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.Name,
			Labels:      labels,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec: corev1.NodeSpec{
			ProviderID: "aws:///" + s.Zone + "/" + s.InstanceID,
			Taints:     append([]corev1.Taint(nil), s.Taints...),
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: s.PrivateIP},
				{Type: corev1.NodeInternalDNS, Address: s.Name},
				{Type: corev1.NodeHostName, Address: s.Name},
			},
			NodeInfo: corev1.NodeSystemInfo{Architecture: arch, OperatingSystem: "linux", KubeletVersion: "v1.32.4-eks",
				MachineID: s.InstanceID, SystemUUID: s.InstanceID},
		},
	}
}

// Registrar registers and deletes Nodes against a kube-apiserver, retrying failures. As the
// kubelets of a real fleet do, nodes register side by side (registrarWorkers at a time); the
// operations on one node run one at a time and in order. It implements NodeRegistrar; run it
// with Run.
type Registrar struct {
	client kubernetes.Interface
	queues [registrarWorkers]regQueue
}

// registrarWorkers bounds the registrations in flight: a scale-out launches hundreds of
// instances within seconds, and their kubelets do not wait for each other.
const registrarWorkers = 32

// regQueue holds the operations of the nodes one worker carries out, in order.
type regQueue struct {
	mu   sync.Mutex
	ops  []regOp
	wake chan struct{}
}

type regOp struct {
	register *NodeSpec
	delete   string
	attempt  int
}

func (op regOp) node() string {
	if op.register != nil {
		return op.register.Name
	}
	return op.delete
}

const maxRegistrarAttempts = 30

// NewRegistrar returns a registrar using client.
func NewRegistrar(client kubernetes.Interface) *Registrar {
	r := &Registrar{client: client}
	for i := range r.queues {
		r.queues[i].wake = make(chan struct{}, 1)
	}
	return r
}

// NewRegistrarFromKubeconfig builds the client from a kubeconfig file, its rate limit sized for
// a fleet's kubelets rather than one client's default (5 QPS: a node every half second).
func NewRegistrarFromKubeconfig(path string) (*Registrar, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating kubernetes client: %w", err)
	}
	return NewRegistrar(client), nil
}

// Register queues the registration of a Node.
func (r *Registrar) Register(s NodeSpec) { r.push(regOp{register: &s}) }

// Deregister queues the deletion of a Node.
func (r *Registrar) Deregister(name string) { r.push(regOp{delete: name}) }

// queueOf is the worker that carries out a node's operations.
func (r *Registrar) queueOf(node string) int {
	h := fnv.New32a()
	h.Write([]byte(node))
	return int(h.Sum32() % registrarWorkers)
}

// push queues op on the worker that owns its node.
func (r *Registrar) push(op regOp) {
	q := &r.queues[r.queueOf(op.node())]
	q.mu.Lock()
	q.ops = append(q.ops, op)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Run carries out queued operations until ctx is done.
func (r *Registrar) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range r.queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx, &r.queues[i])
		}()
	}
	wg.Wait()
}

// work carries out one queue's operations in order, retrying a failed one before the next.
func (r *Registrar) work(ctx context.Context, q *regQueue) {
	for {
		q.mu.Lock()
		var op regOp
		ok := len(q.ops) > 0
		if ok {
			op, q.ops = q.ops[0], q.ops[1:]
		}
		q.mu.Unlock()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
			}
			continue
		}
		if err := r.do(ctx, op); err != nil {
			if ctx.Err() != nil {
				return
			}
			op.attempt++
			if op.attempt >= maxRegistrarAttempts {
				log.Printf("awsemu: registrar giving up: %v", err)
				continue
			}
			log.Printf("awsemu: registrar (attempt %d, will retry): %v", op.attempt, err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(op.attempt) * 200 * time.Millisecond):
			}
			q.mu.Lock()
			q.ops = append([]regOp{op}, q.ops...)
			q.mu.Unlock()
		}
	}
}

func (r *Registrar) do(ctx context.Context, op regOp) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nodes := r.client.CoreV1().Nodes()
	if op.register == nil {
		err := nodes.Delete(ctx, op.delete, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting node %s: %w", op.delete, err)
		}
		return nil
	}
	want := op.register.Node()
	got, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = nodes.Get(ctx, want.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", want.Name, err)
	}
	if len(got.Status.Capacity) == 0 {
		got.Status.Capacity, got.Status.Allocatable = want.Status.Capacity, want.Status.Allocatable
		got.Status.Addresses, got.Status.NodeInfo = want.Status.Addresses, want.Status.NodeInfo
		if _, err := nodes.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("setting status of node %s: %w", want.Name, err)
		}
	}
	return nil
}
