package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/catalogkv"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/subject"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/localcluster"
	"github.com/fleetwright/fleetwright/tools/localcluster/clustertest"
)

func TestMain(m *testing.M) { clustertest.Main(m) }

var testZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// env is one test's world: the shared control plane, its own NATS server, the scheduler
// running in-process, and clients to look at what it did.
type env struct {
	t       *testing.T
	ctx     context.Context
	c       *localcluster.Cluster
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	conn    *bus.Conn
	ns      string
	logs    stderrLog
	natsURL string
}

// The repository's example manifests: a NodePool and EC2NodeClass named default, in v1 and in
// v1alpha5 (Provisioner and AWSNodeTemplate).
const (
	v1Example       = "deploy/examples/v1/default.yaml"
	v1alpha5Example = "deploy/examples/v1alpha5/default.yaml"
)

// newEnv starts NATS, publishes the catalog, makes the test's namespace and applies the
// manifests of the repository. Cluster-scoped objects the test creates are its own to clean up.
func newEnv(t *testing.T, ns string, manifests ...string) *env {
	c := e2e.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	kube, err := c.Client()
	require.NoError(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	srv := bustest.RunServer(t)
	conn, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL(), Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.EnsureStreams(ctx))
	e := &env{t: t, ctx: ctx, c: c, kube: kube, dyn: dyn, conn: conn, ns: ns, natsURL: srv.ClientURL()}
	for _, name := range []string{ns, "fleetwright"} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	// Leave no pending pods behind for the next test's nodes to attract, or for its scheduler to
	// offer when it takes the lease, and no DaemonSet, whose pods the next test's scheduler would
	// count on every node it plans (the namespace controller deletes it, but seconds later on a
	// loaded machine): the namespace's DaemonSets and pods are gone before the next test.
	t.Cleanup(func() {
		ctx := context.Background()
		now := int64(0) // no kubelet runs here to confirm a graceful deletion
		_ = kube.AppsV1().DaemonSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &now}, metav1.ListOptions{})
		_ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		assert.Eventually(t, func() bool {
			pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(pods.Items) > 0 {
				return false
			}
			ds, err := kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(ds.Items) == 0
		}, time.Minute, 100*time.Millisecond, "namespace %s empties", ns)
	})
	e.publishCatalog()
	for _, m := range manifests {
		_, err := e2e.Kubectl(e.c, "apply", "-f", filepath.Join(e2e.Root(t), m))
		require.NoError(t, err)
	}
	return e
}

// start runs a scheduler replica in-process until the test ends (or the returned stop is
// called), its log captured with every other replica's. The first replica started also
// cleans up the cluster-scoped objects when the test ends.
func (e *env) start(identity string, extra ...string) (stop func()) {
	return e.run(identity, true, extra...)
}

// standby runs a scheduler replica that another leads: it does not wait for it to lead.
func (e *env) standby(identity string, extra ...string) (stop func()) {
	return e.run(identity, false, extra...)
}

func (e *env) run(identity string, leads bool, extra ...string) (stop func()) {
	first := e.logs == ""
	if first {
		e.logs = captureStderr(e.t)
	}
	done := make(chan error, 1)
	sctx, cancel := context.WithCancel(e.ctx)
	args := append([]string{"--nats-url", e.natsURL, "--kubeconfig", e.c.Kubeconfig, "--admin-addr", "127.0.0.1:0",
		"--identity", identity, "--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "500ms",
		"--reconcile-interval", "2s"}, extra...)
	go func() { done <- run(sctx, args) }()
	// Leading, the replica first offers the pods already waiting (its takeover); a test that
	// makes pods after start means them for its batches, so it starts once that is done.
	if leads {
		require.Eventually(e.t, func() bool { return strings.Contains(e.logs.String(), `"batch":"takeover-`+identity+`-`) },
			time.Minute, 50*time.Millisecond, "scheduler %s leads and has offered the pods already waiting", identity)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			assert.NoError(e.t, <-done, "scheduler %s stops cleanly", identity)
		})
	}
	e.t.Cleanup(func() {
		stop()
		if !first {
			return
		}
		if e.t.Failed() {
			e.t.Logf("---- scheduler log ----\n%s", e.logs.String())
		}
		e.cleanupClusterObjects()
	})
	return stop
}

// cleanupClusterObjects removes the cluster-scoped Karpenter objects, so the next test starts
// from none. No terminator runs here: the termination finalizer the scheduler puts on its claims
// is released by the test.
func (e *env) cleanupClusterObjects() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, gvr := range []schema.GroupVersionResource{clusterstate.NodeClaims, clusterstate.NodePools, clusterstate.NodeClasses, clusterstate.Provisioners, clusterstate.NodeTemplates} {
		r := e.dyn.Resource(gvr)
		if list, err := r.List(ctx, metav1.ListOptions{}); err == nil {
			for _, o := range list.Items {
				_, _ = r.Patch(ctx, o.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			}
		}
		if err := r.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); apierrors.IsNotFound(err) {
			continue
		}
		assert.Eventually(e.t, func() bool {
			list, err := r.List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0
		}, time.Minute, 100*time.Millisecond, "%s deleted", gvr.Resource)
	}
}

// publishCatalog writes the embedded catalog, offered in three zones, to the catalog bucket
// as the launcher would: on-demand at list price, spot at the modelled price.
func (e *env) publishCatalog() {
	cat := &catalogv1.Catalog{Region: "us-east-1", Source: "pkg/catalog (test)"}
	for _, t := range catalog.Schedulable() {
		if t.OnDemandPriceUSDPerHour <= 0 {
			continue
		}
		it := &catalogv1.InstanceType{Name: t.Name, Family: t.Family, Category: t.Category, Generation: int32(t.Generation),
			Size: t.Size, Vcpu: int32(t.VCPU), MemoryMib: t.MemoryMiB, Architecture: t.Arch, OperatingSystems: []string{"linux"},
			GpuCount: int32(t.GPUCount), MaxPods: int32(t.MaxPods), BareMetal: t.BareMetal, Burstable: t.Burstable}
		if t.Hypervisor != nil {
			it.Hypervisor = *t.Hypervisor
		}
		if t.CPUManufacturer != nil {
			it.CpuManufacturer = *t.CPUManufacturer
		}
		for _, z := range testZones {
			it.Offerings = append(it.Offerings,
				&catalogv1.Offering{Zone: z, CapacityType: commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND, PriceUsdPerHour: t.OnDemandPriceUSDPerHour, Available: true},
				&catalogv1.Offering{Zone: z, CapacityType: commonv1.CapacityType_CAPACITY_TYPE_SPOT, PriceUsdPerHour: catalog.SpotPrice(t, z), Available: true, PriceIsModelled: true})
		}
		cat.InstanceTypes = append(cat.InstanceTypes, it)
	}
	kv, err := e.conn.JetStream().KeyValue(e.ctx, e.conn.Prefix().CatalogBucket())
	require.NoError(e.t, err)
	_, err = catalogkv.Publish(e.ctx, kv, cat)
	require.NoError(e.t, err)
}

// pendingPods creates a deployment of n pause pods and waits until kube-scheduler has marked
// them all unschedulable.
func (e *env) pendingPods(name string, n int32, cpu string, mutate ...func(*corev1.PodSpec)) []*corev1.Pod {
	labels := map[string]string{"app": name}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}
	for _, m := range mutate {
		m(&spec)
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
	_, err := e.kube.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{})
	require.NoError(e.t, err)
	var pods []*corev1.Pod
	seen := 0
	if !assert.Eventually(e.t, func() bool {
		list, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false
		}
		pods = pods[:0]
		for i := range list.Items {
			if ok, _ := podproj.Pending(&list.Items[i]); ok {
				pods = append(pods, &list.Items[i])
			}
		}
		seen = len(list.Items)
		return len(pods) == int(n)
	}, time.Minute, 100*time.Millisecond) {
		e.t.Fatalf("kube-scheduler marked %d of %d pods (%d exist) unschedulable", len(pods), n, seen)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods
}

// publishBatch publishes the pods as one PendingPodBatch, as pod-watcher would.
func (e *env) publishBatch(id string, pods []*corev1.Pod) {
	b := &podsv1.PendingPodBatch{BatchId: id, WatcherId: "test"}
	for _, p := range pods {
		b.Pods = append(b.Pods, podproj.Project(p, nil))
	}
	require.NoError(e.t, e.conn.Publish(e.ctx, e.conn.Prefix().Of(subject.PodsPending), b, id))
}

// nextIntent waits for the next LaunchIntent on <prefix>.launch.intents (the test's own
// consumer, which starts at the stream's first) and returns it with its Nats-Msg-Id.
func (e *env) nextIntent() (*launchv1.LaunchIntent, string) {
	cons, err := e.conn.EnsureConsumer(e.ctx, bus.ConsumerSpec{Durable: "test-intents", Subject: e.conn.Prefix().Of(subject.LaunchIntents)})
	require.NoError(e.t, err)
	msg, err := cons.Next(jetstream.FetchMaxWait(time.Minute))
	require.NoError(e.t, err, "a launch intent is published")
	require.NoError(e.t, msg.Ack())
	var in launchv1.LaunchIntent
	require.NoError(e.t, proto.Unmarshal(msg.Data(), &in))
	return &in, msg.Headers().Get("Nats-Msg-Id")
}

// nextIntentOf waits for the next LaunchIntent and checks it is the claim's: its dedup id the
// claim's name, its uid the claim's.
func (e *env) nextIntentOf(nc karpv1.NodeClaim) *launchv1.LaunchIntent {
	e.t.Helper()
	intent, msgID := e.nextIntent()
	assert.Equal(e.t, nc.Name, msgID)
	assert.Equal(e.t, string(nc.UID), intent.GetNodeClaimUid())
	return intent
}

// schedule publishes the pods as one batch and returns the next launch intent, with its
// Nats-Msg-Id; it logs how long the intent took to come.
func (e *env) schedule(batch string, pods []*corev1.Pod) (*launchv1.LaunchIntent, string) {
	sent := time.Now()
	e.publishBatch(batch, pods)
	intent, msgID := e.nextIntent()
	e.t.Logf("batch %s published → launch intent received: %v", batch, time.Since(sent))
	return intent, msgID
}

// refused publishes the pods as the first batch and checks that it makes no NodeClaim and
// that every pod is told why in a FailedScheduling event.
func (e *env) refused(batch string, pods []*corev1.Pod, why string) {
	e.t.Helper()
	e.publishBatch(batch, pods)
	e.batchesDone(1)
	e.eventsSay(pods, reasonFailedScheduling, why)
	assert.Empty(e.t, e.nodeClaims())
}

// batchesDone waits until the scheduler's consumer has acked n batches.
func (e *env) batchesDone(n uint64) {
	require.Eventually(e.t, func() bool {
		stream, err := e.conn.JetStream().StreamNameBySubject(e.ctx, e.conn.Prefix().Of(subject.PodsPending))
		if err != nil {
			return false
		}
		c, err := e.conn.JetStream().Consumer(e.ctx, stream, durable)
		if err != nil {
			return false
		}
		info, err := c.Info(e.ctx)
		return err == nil && info.AckFloor.Consumer >= n && info.NumAckPending == 0
	}, time.Minute, 50*time.Millisecond, "the scheduler acks %d batch(es)", n)
}

// launchIntentCount is how many intents the LAUNCH stream holds.
func (e *env) launchIntentCount() uint64 {
	stream, err := e.conn.JetStream().StreamNameBySubject(e.ctx, e.conn.Prefix().Of(subject.LaunchIntents))
	require.NoError(e.t, err)
	s, err := e.conn.JetStream().Stream(e.ctx, stream)
	require.NoError(e.t, err)
	info, err := s.Info(e.ctx, jetstream.WithSubjectFilter(e.conn.Prefix().Of(subject.LaunchIntents)))
	require.NoError(e.t, err)
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// nodeClaims lists the NodeClaims.
func (e *env) nodeClaims() []karpv1.NodeClaim {
	list, err := e.dyn.Resource(clusterstate.NodeClaims).List(e.ctx, metav1.ListOptions{})
	require.NoError(e.t, err)
	out := make([]karpv1.NodeClaim, len(list.Items))
	for i, u := range list.Items {
		require.NoError(e.t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out[i]))
	}
	return out
}

// patch merge-patches the named object.
func (e *env) patch(gvr schema.GroupVersionResource, name, patch string) {
	e.t.Helper()
	_, err := e.dyn.Resource(gvr).Patch(e.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(e.t, err)
}

// edit reads the named object, lets change edit it, and writes it back: its status if status.
func (e *env) edit(gvr schema.GroupVersionResource, name string, status bool, change func(*unstructured.Unstructured)) {
	e.t.Helper()
	res := e.dyn.Resource(gvr)
	u, err := res.Get(e.ctx, name, metav1.GetOptions{})
	require.NoError(e.t, err)
	change(u)
	if status {
		_, err = res.UpdateStatus(e.ctx, u, metav1.UpdateOptions{})
	} else {
		_, err = res.Update(e.ctx, u, metav1.UpdateOptions{})
	}
	require.NoError(e.t, err)
}

// nominationOf reads the pod's latest nomination as the NodeClaims record it (zero if none).
func (e *env) nominationOf(p *corev1.Pod) podproj.PodNomination {
	e.t.Helper()
	var latest podproj.PodNomination
	claims := e.nodeClaims()
	for i := range claims {
		if n, ok := podproj.NominationOn(&claims[i], string(p.UID)); ok && (latest.Claim == "" || n.Supersedes(latest)) {
			latest = n
		}
	}
	return latest
}

// nominatedTo names the NodeClaim the pod was last nominated to ("" if none).
func (e *env) nominatedTo(p *corev1.Pod) string { return e.nominationOf(p).Claim }

// nominations maps the name of each pod, read again, to the NodeClaim it was last nominated to
// ("" if none).
func (e *env) nominations(pods []*corev1.Pod) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, p := range e.refresh(pods) {
		out[p.Name] = e.nominatedTo(p)
	}
	return out
}

// allNominated reports whether every pod is nominated to a NodeClaim.
func (e *env) allNominated(pods []*corev1.Pod) bool {
	return !slices.Contains(slices.Collect(maps.Values(e.nominations(pods))), "")
}

// assertNominatedTo checks that every pod was last nominated to the claim.
func (e *env) assertNominatedTo(pods []*corev1.Pod, claim, why string) {
	e.t.Helper()
	for pod, got := range e.nominations(pods) {
		assert.Equal(e.t, claim, got, "pod %s: %s", pod, why)
	}
}

// onlyClaim is the one NodeClaim there is; the test fails if there are none or more.
func (e *env) onlyClaim(msgAndArgs ...any) karpv1.NodeClaim {
	e.t.Helper()
	claims := e.nodeClaims()
	names := make([]string, 0, len(claims))
	for _, c := range claims {
		names = append(names, c.Name)
	}
	require.Len(e.t, names, 1, msgAndArgs...)
	return claims[0]
}

// podEvents returns the messages of the pod's events with the reason.
func (e *env) podEvents(pod *corev1.Pod, reason string) []string {
	list, err := e.kube.CoreV1().Events(pod.Namespace).List(e.ctx, metav1.ListOptions{
		FieldSelector: fmt.Sprintf("involvedObject.name=%s,reason=%s", pod.Name, reason)})
	require.NoError(e.t, err)
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Message)
	}
	return out
}

// eventually waits for every pod to have an event with the reason containing want.
func (e *env) eventsSay(pods []*corev1.Pod, reason, want string) {
	for _, p := range pods {
		require.Eventually(e.t, func() bool {
			for _, m := range e.podEvents(p, reason) {
				if strings.Contains(m, want) {
					return true
				}
			}
			return false
		}, time.Minute, 100*time.Millisecond, "pod %s gets a %s event saying %q", p.Name, reason, want)
	}
}

// stderrLog is the file that what the process writes to stderr (the services' log) goes to.
type stderrLog string

// String is what has been written so far.
func (l stderrLog) String() string {
	b, _ := os.ReadFile(string(l))
	return string(b)
}

// captureStderr sends what the process writes to stderr into a file until the test ends. Tests
// in this package run one at a time.
func captureStderr(t *testing.T) stderrLog {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr.log"))
	require.NoError(t, err)
	orig := os.Stderr
	os.Stderr = f
	t.Cleanup(func() {
		os.Stderr = orig
		_ = f.Close()
	})
	return stderrLog(f.Name())
}
