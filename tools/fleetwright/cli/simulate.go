package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/subject"
	schedulerv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/scheduler/v1"
)

// SimulateReport is the scheduler's answer, as printed.
type SimulateReport struct {
	NodeClaims      []SimulatedClaim `json:"nodeClaims"`
	Placements      []string         `json:"placements,omitempty"` // "ns/pod -> node"
	Unschedulable   []UnplacedPod    `json:"unschedulable,omitempty"`
	PriceUSDPerHour float64          `json:"priceUSDPerHour"`
	AnsweredBy      string           `json:"answeredBy,omitempty"`
	Pods            int              `json:"pods"`
}

// SimulatedClaim is one NodeClaim the workload would get.
type SimulatedClaim struct {
	NodePool        string           `json:"nodePool"`
	InstanceTypes   []ConsideredType `json:"instanceTypes"` // cheapest first
	PriceUSDPerHour float64          `json:"priceUSDPerHour"`
	Pods            []string         `json:"pods"`
}

// UnplacedPod is a pod no pool takes, with the per-pool explanation.
type UnplacedPod struct {
	Pod string            `json:"pod"`
	Why []PoolExplanation `json:"why"`
}

func simulateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlagSet("simulate", &o, stderr)
	file := fs.String("f", "", "workload manifest (Pod, Deployment, ReplicaSet, StatefulSet, Job, CronJob, ReplicationController; several documents allowed); - reads stdin")
	namespace := fs.String("n", "default", "namespace of objects that name none")
	pos, err := parse(fs, &o, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("simulate takes no arguments (the workload comes with -f), got %q", pos)
	}
	if *file == "" {
		return usagef("simulate needs -f FILE")
	}
	var raw []byte
	if *file == "-" {
		raw, err = io.ReadAll(os.Stdin)
	} else {
		raw, err = os.ReadFile(*file)
	}
	if err != nil {
		return fmt.Errorf("reading workload: %w", err)
	}
	pods, err := workloadPods(raw, *namespace)
	if err != nil {
		return err
	}
	kube, err := o.kube()
	if err != nil {
		return err
	}
	conn, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	req := &schedulerv1.SimulateRequest{}
	vols := kubeVolumes{ctx: ctx, c: kube}
	for _, p := range pods {
		req.Pods = append(req.Pods, podproj.Project(p, vols))
	}
	resp, err := askScheduler(ctx, conn, req)
	if err != nil {
		return err
	}
	r := simulateReport(resp, len(pods))
	if o.output == "json" {
		return printJSON(stdout, r)
	}
	printSimulateReport(stdout, r)
	return nil
}

// askScheduler sends the request to <prefix>.scheduler.simulate and decodes the answer; an
// error the scheduler gives (Fw-Error) is returned as is.
func askScheduler(ctx context.Context, conn *bus.Conn, req *schedulerv1.SimulateRequest) (*schedulerv1.SimulateResponse, error) {
	data, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(conn.Prefix().Of(subject.SchedulerSimulate))
	m.Data = data
	m.Header.Set(bus.HeaderType, string(req.ProtoReflect().Descriptor().FullName()))
	reply, err := conn.NATS().RequestMsgWithContext(ctx, m)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("no scheduler answers on %s: is one running (and this NATS user allowed to ask)?", m.Subject)
	case err != nil:
		return nil, fmt.Errorf("asking the scheduler: %w", err)
	}
	if msg := reply.Header.Get(bus.HeaderError); msg != "" {
		return nil, fmt.Errorf("the scheduler refused: %s", msg)
	}
	resp := &schedulerv1.SimulateResponse{}
	if err := proto.Unmarshal(reply.Data, resp); err != nil {
		return nil, fmt.Errorf("decoding the scheduler's answer: %w", err)
	}
	return resp, nil
}

// workloadPods reads the manifest's objects and makes the pods they would run: replicas of a
// template, a Job's parallelism, a CronJob's job. Anything else is refused, saying so.
func workloadPods(raw []byte, namespace string) ([]*corev1.Pod, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	codecs := clientgoscheme.Codecs.UniversalDeserializer()
	var pods []*corev1.Pod
	for doc := 1; ; doc++ {
		var ext runtime.RawExtension
		if err := dec.Decode(&ext); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("workload document %d: %w", doc, err)
		}
		if len(bytes.TrimSpace(ext.Raw)) == 0 || string(bytes.TrimSpace(ext.Raw)) == "null" {
			continue
		}
		obj, gvk, err := codecs.Decode(ext.Raw, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("workload document %d: %w", doc, err)
		}
		more, err := podsOf(obj, namespace)
		if err != nil {
			return nil, fmt.Errorf("workload document %d (%s): %w", doc, gvk.Kind, err)
		}
		pods = append(pods, more...)
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("the workload makes no pod")
	}
	for i, p := range pods {
		p.UID = types.UID(fmt.Sprintf("simulated-%d", i)) // unique within the request; exists nowhere
		p.CreationTimestamp = metav1.Now()
	}
	return pods, nil
}

func podsOf(obj runtime.Object, namespace string) ([]*corev1.Pod, error) {
	replicas := func(r *int32) int {
		if r == nil {
			return 1
		}
		return int(*r)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		p := o.DeepCopy()
		if p.Namespace == "" {
			p.Namespace = namespace
		}
		return []*corev1.Pod{p}, nil
	case *appsv1.Deployment:
		return fromTemplate(o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Replicas), namespace), nil
	case *appsv1.ReplicaSet:
		return fromTemplate(o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Replicas), namespace), nil
	case *appsv1.StatefulSet:
		return fromTemplate(o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Replicas), namespace), nil
	case *corev1.ReplicationController:
		if o.Spec.Template == nil {
			return nil, fmt.Errorf("no pod template")
		}
		return fromTemplate(o.ObjectMeta, *o.Spec.Template, replicas(o.Spec.Replicas), namespace), nil
	case *batchv1.Job:
		return fromTemplate(o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Parallelism), namespace), nil
	case *batchv1.CronJob:
		return fromTemplate(o.ObjectMeta, o.Spec.JobTemplate.Spec.Template, replicas(o.Spec.JobTemplate.Spec.Parallelism), namespace), nil
	case *appsv1.DaemonSet:
		return nil, fmt.Errorf("a DaemonSet runs on every node rather than asking for capacity; it is counted as overhead once applied")
	default:
		return nil, fmt.Errorf("not a workload the simulation understands (want Pod, Deployment, ReplicaSet, StatefulSet, ReplicationController, Job or CronJob)")
	}
}

func fromTemplate(owner metav1.ObjectMeta, tmpl corev1.PodTemplateSpec, n int, namespace string) []*corev1.Pod {
	ns := owner.Namespace
	if ns == "" {
		ns = namespace
	}
	var out []*corev1.Pod
	for i := range n {
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", owner.Name, i), Labels: tmpl.Labels, Annotations: tmpl.Annotations},
			Spec:       *tmpl.Spec.DeepCopy(),
		})
	}
	return out
}

// kubeVolumes answers podproj.VolumeLookup from the API, so a pod's claims bring their zones.
type kubeVolumes struct {
	ctx context.Context
	c   client.Client
}

func (k kubeVolumes) Claim(ns, name string) (*corev1.PersistentVolumeClaim, bool) {
	var o corev1.PersistentVolumeClaim
	return &o, k.c.Get(k.ctx, client.ObjectKey{Namespace: ns, Name: name}, &o) == nil
}

func (k kubeVolumes) Volume(name string) (*corev1.PersistentVolume, bool) {
	var o corev1.PersistentVolume
	return &o, k.c.Get(k.ctx, client.ObjectKey{Name: name}, &o) == nil
}

func (k kubeVolumes) StorageClass(name string) (*storagev1.StorageClass, bool) {
	var o storagev1.StorageClass
	return &o, k.c.Get(k.ctx, client.ObjectKey{Name: name}, &o) == nil
}

func simulateReport(resp *schedulerv1.SimulateResponse, pods int) *SimulateReport {
	r := &SimulateReport{PriceUSDPerHour: resp.GetPriceUsdPerHour(), AnsweredBy: resp.GetAnsweredBy(), Pods: pods, NodeClaims: []SimulatedClaim{}}
	for _, c := range resp.GetNodeClaims() {
		sc := SimulatedClaim{NodePool: c.GetNodePoolName(), PriceUSDPerHour: c.GetPriceUsdPerHour()}
		for _, it := range c.GetInstanceTypes() {
			ct := ConsideredType{Name: it.GetName()}
			if len(it.GetOfferings()) > 0 {
				o := it.GetOfferings()[0]
				ct.PriceUSDPerHour, ct.Offering = o.GetPriceUsdPerHour(), o.GetZone()+"/"+capacityType(o.GetCapacityType())
			}
			sc.InstanceTypes = append(sc.InstanceTypes, ct)
		}
		for _, p := range c.GetPods() {
			sc.Pods = append(sc.Pods, p.GetNamespace()+"/"+p.GetName())
		}
		r.NodeClaims = append(r.NodeClaims, sc)
	}
	for _, p := range resp.GetPlacements() {
		r.Placements = append(r.Placements, p.GetPod().GetNamespace()+"/"+p.GetPod().GetName()+" -> "+p.GetNode())
	}
	for _, u := range resp.GetUnschedulable() {
		r.Unschedulable = append(r.Unschedulable, UnplacedPod{Pod: u.GetPod().GetNamespace() + "/" + u.GetPod().GetName(), Why: explanations(u.GetReason())})
	}
	return r
}

func printSimulateReport(w io.Writer, r *SimulateReport) {
	fmt.Fprintf(w, "%d pod(s): %d new node(s) for $%.4f/h, %d on existing capacity, %d unschedulable (nothing was created)\n",
		r.Pods, len(r.NodeClaims), r.PriceUSDPerHour, len(r.Placements), len(r.Unschedulable))
	for i, c := range r.NodeClaims {
		var types []string
		for j, it := range c.InstanceTypes {
			if j == 5 {
				types = append(types, fmt.Sprintf("... and %d more", len(c.InstanceTypes)-j))
				break
			}
			types = append(types, fmt.Sprintf("%s $%.4f/h (%s)", it.Name, it.PriceUSDPerHour, it.Offering))
		}
		fmt.Fprintf(w, "NodeClaim %d:   nodepool %s, $%.4f/h\n", i+1, c.NodePool, c.PriceUSDPerHour)
		fmt.Fprintf(w, "  types:       %s\n", strings.Join(types, ", "))
		fmt.Fprintf(w, "  pods:        %s\n", strings.Join(c.Pods, ", "))
	}
	for _, p := range r.Placements {
		fmt.Fprintf(w, "Fits existing: %s\n", p)
	}
	for _, u := range r.Unschedulable {
		fmt.Fprintf(w, "Unschedulable: %s\n", u.Pod)
		for _, e := range u.Why {
			if e.NodePool == "" {
				fmt.Fprintf(w, "  %s\n", e.Why)
			} else {
				fmt.Fprintf(w, "  nodepool %s: %s\n", e.NodePool, e.Why)
			}
		}
	}
	if r.AnsweredBy != "" {
		fmt.Fprintf(w, "Answered by scheduler %s\n", r.AnsweredBy)
	}
}
