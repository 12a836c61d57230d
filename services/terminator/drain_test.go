package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/telemetry"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// drainer is an executor that only drains, against the test's API server; its pauses between
// rounds are recorded and handed to between (if set) instead of slept.
type drainer struct {
	*executor
	pauses  []time.Duration
	between func(n int)
}

func (e *env) drainer() *drainer {
	d := &drainer{}
	d.executor = &executor{cs: e.kube, metrics: newMetrics(prometheus.NewRegistry()), now: time.Now, log: zerolog.Nop(),
		sleep: func(context.Context, time.Duration) {}}
	d.sleep = func(_ context.Context, w time.Duration) {
		d.pauses = append(d.pauses, w)
		if d.between != nil {
			d.between(len(d.pauses))
		}
	}
	return d
}

// runningPod is pod, labelled app=<app> and Running: the Eviction API consults budgets only for
// running pods. mutate change it before it is created.
func (e *env) runningPod(name, node, app string, mutate ...func(*corev1.Pod)) {
	e.t.Helper()
	p := e.pod(name, node, func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": app}
		for _, m := range mutate {
			m(p)
		}
	})
	require.NoError(e.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Phase = corev1.PodRunning
		_, err = e.kube.CoreV1().Pods(e.ns).UpdateStatus(e.ctx, cur, metav1.UpdateOptions{})
		return err
	}))
}

// budget creates a PodDisruptionBudget over the pods labelled app=<app> that lets maxUnavailable
// of them go at once.
func (e *env) budget(name, app string, maxUnavailable int32) {
	e.t.Helper()
	_, err := e.kube.PolicyV1().PodDisruptionBudgets(e.ns).Create(e.ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
}

// pod creates a pod bound to node (which need not exist) and returns it.
func (e *env) pod(name, node string, mutate func(*corev1.Pod)) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0), Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
	if mutate != nil {
		mutate(p)
	}
	p, err := e.kube.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{})
	require.NoError(e.t, err)
	return p
}

// A pod already terminating past its deletionTimestamp (here a finalizer holds it; on a real
// node, a kubelet that is gone) does not hold the drain: the other pods are evicted and the
// drain finishes, as Karpenter's does.
func TestDrainIgnoresPodsTerminatingPastTheirGracePeriod(t *testing.T) {
	e := newEnv(t, 201)
	node := e.ns + "-node"
	stuck := e.pod("stuck", node, func(p *corev1.Pod) { p.Finalizers = []string{"fleetwright.io/test-hold"} })
	t.Cleanup(func() {
		p, err := e.kube.CoreV1().Pods(e.ns).Get(context.Background(), stuck.Name, metav1.GetOptions{})
		if err == nil {
			p.Finalizers = nil
			_, _ = e.kube.CoreV1().Pods(e.ns).Update(context.Background(), p, metav1.UpdateOptions{})
		}
	})
	require.NoError(t, e.kube.CoreV1().Pods(e.ns).Delete(e.ctx, stuck.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	e.pod("app", node, nil)

	d := e.drainer()
	var st drainStats
	done, err := d.drain(e.ctx, node, drainPolicy{}, time.Now().Add(10*time.Second), &st, d.log, nil)
	require.NoError(t, err)
	assert.True(t, done, "the drain finished: the pod terminating past its grace period does not hold it")
	assert.EqualValues(t, 1, st.Evicted, "the other pod was evicted")
	p, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, stuck.Name, metav1.GetOptions{})
	require.NoError(t, err, "the finalizer still holds the terminating pod")
	assert.NotNil(t, p.DeletionTimestamp)
}

// A drained node's VolumeAttachments hold the instance's termination until they are gone;
// once the claim's termination grace period is over they are no longer waited for.
func TestDrainWaitsForVolumeAttachments(t *testing.T) {
	e := newEnv(t, 202)
	node := e.ns + "-node"
	vas := e.kube.StorageV1().VolumeAttachments()
	attach := func(name string) {
		_, err := vas.Create(e.ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: node,
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-" + name)}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = vas.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	attach(e.ns + "-a")
	_, err := vas.Create(e.ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-other"},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: e.ns + "-elsewhere",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-other")}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = vas.Delete(context.Background(), e.ns+"-other", metav1.DeleteOptions{}) })

	d := e.drainer()
	d.between = func(n int) {
		if n == 3 {
			require.NoError(t, vas.Delete(e.ctx, e.ns+"-a", metav1.DeleteOptions{}))
		}
	}
	var st drainStats
	done, err := d.drain(e.ctx, node, drainPolicy{}, time.Now().Add(time.Minute), &st, d.log, nil)
	require.NoError(t, err)
	assert.True(t, done)
	assert.GreaterOrEqual(t, len(d.pauses), 3, "the drain waited while the attachment was there")
	_, err = vas.Get(e.ctx, e.ns+"-a", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the drain finished only once the node's attachment was gone (%v)", err)

	// Past the termination grace period an attachment no longer holds the termination.
	attach(e.ns + "-b")
	d = e.drainer()
	done, err = d.drain(e.ctx, node, drainPolicy{Deadline: time.Now().Add(-time.Second)}, time.Now().Add(10*time.Second), &st, d.log, nil)
	require.NoError(t, err)
	assert.True(t, done, "the grace period is over: the attachment is not waited for")
	assert.Empty(t, d.pauses)

	// Within a delivery's budget the drain stops and says so (the intent comes back).
	d = e.drainer()
	done, err = d.drain(e.ctx, node, drainPolicy{}, time.Now().Add(-time.Second), &st, d.log, nil)
	require.NoError(t, err)
	assert.False(t, done, "the attachment is still there when the delivery's budget is spent")
}

// An eviction refused with something other than a 429 (here the API server's 500 for a pod
// two PodDisruptionBudgets select) backs off like a 429, is counted, and the drain goes on
// once the cause is gone.
func TestDrainBacksOffOnEvictionErrors(t *testing.T) {
	e := newEnv(t, 203)
	node := e.ns + "-node"
	e.runningPod("guarded", node, "guarded")
	e.budget("one", "guarded", 1)
	e.budget("two", "guarded", 1)

	d := e.drainer()
	d.between = func(n int) {
		if n == 5 {
			for _, name := range []string{"one", "two"} {
				require.NoError(t, e.kube.PolicyV1().PodDisruptionBudgets(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{}))
			}
		}
	}
	var st drainStats
	done, err := d.drain(e.ctx, node, drainPolicy{}, time.Now().Add(time.Minute), &st, d.log, nil)
	require.NoError(t, err)
	assert.True(t, done)
	require.GreaterOrEqual(t, len(d.pauses), 5)
	assert.Equal(t, []time.Duration{minBackoff, 2 * minBackoff, 4 * minBackoff, 8 * minBackoff, 16 * minBackoff}, d.pauses[:5],
		"each refused round waits twice as long as the one before")
	assert.GreaterOrEqual(t, st.Retries, int32(5), "the refusals are counted as retries")
	assert.GreaterOrEqual(t, testutil.ToFloat64(d.metrics.evictions.WithLabelValues("error")), 5.0)
	assert.EqualValues(t, 1, st.Evicted)
}

// What a drain logs carries the trace_id and span_id of the span it runs in, so a line such as
// "evicted pod" leads to the intent's trace.
func TestDrainLogLinesCarryTheSpan(t *testing.T) {
	e := newEnv(t, 205)
	node := e.ns + "-node"
	e.pod("app", node, nil)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(e.ctx, "terminator.drain")
	defer span.End()

	var out bytes.Buffer
	d := e.drainer()
	log := telemetry.NewLoggerTo(&out, "terminator", "dev", "info")
	var st drainStats
	done, err := d.drain(ctx, node, drainPolicy{}, time.Now().Add(10*time.Second), &st, log, nil)
	require.NoError(t, err)
	require.True(t, done)
	var evicted map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if m["message"] == "evicted pod" {
			evicted = m
		}
	}
	require.NotNil(t, evicted, "the drain logged the eviction: %s", out.String())
	assert.Equal(t, span.SpanContext().TraceID().String(), evicted["trace_id"])
	assert.Equal(t, span.SpanContext().SpanID().String(), evicted["span_id"])
}

// An eviction a PodDisruptionBudget granted but whose pod was never deleted (the evicting
// client died between the Eviction API's two writes: a terminator killed mid-drain) leaves the
// budget refusing every eviction for two minutes. The drain completes the granted one by
// deleting that pod, and only that one: a grant older than the pod is for an earlier pod of
// the same name.
func TestDrainCompletesAnEvictionItsBudgetGranted(t *testing.T) {
	e := newEnv(t, 206)
	node := e.ns + "-node"
	ready := func(name string) *corev1.Pod {
		e.runningPod(name, node, "granted")
		var p *corev1.Pod
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			p, err = e.kube.CoreV1().Pods(e.ns).UpdateStatus(e.ctx, cur, metav1.UpdateOptions{})
			return err
		}))
		return p
	}
	interrupted, renamed := ready("interrupted"), ready("renamed")
	pdbs := e.kube.PolicyV1().PodDisruptionBudgets(e.ns)
	// minAvailable: bare pods have no controller to count them by for maxUnavailable.
	_, err := pdbs.Create(e.ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "one"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "granted"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		b, err := pdbs.Get(e.ctx, "one", metav1.GetOptions{})
		return err == nil && b.Status.ObservedGeneration == b.Generation && b.Status.ExpectedPods == 2
	}, time.Minute, 100*time.Millisecond, "the disruption controller observes the budget")
	// What the Eviction API's first write leaves: the grant recorded, the budget spent. The
	// disruption controller keeps both records for two minutes: the pods are still there.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := pdbs.Get(e.ctx, "one", metav1.GetOptions{})
		if err != nil {
			return err
		}
		b.Status.DisruptionsAllowed = 0
		b.Status.DisruptedPods = map[string]metav1.Time{
			interrupted.Name: metav1.NewTime(interrupted.CreationTimestamp.Add(time.Second)),
			renamed.Name:     metav1.NewTime(renamed.CreationTimestamp.Add(-time.Second)),
		}
		_, err = pdbs.UpdateStatus(e.ctx, b, metav1.UpdateOptions{})
		return err
	}))

	d := e.drainer()
	var st drainStats
	done, err := d.drain(e.ctx, node, drainPolicy{}, time.Now().Add(5*time.Second), &st, d.log, nil)
	require.NoError(t, err)
	assert.False(t, done, "the pod the grant is not for stays: the budget has nothing left for it")
	_, err = e.kube.CoreV1().Pods(e.ns).Get(e.ctx, interrupted.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the pod whose eviction was granted is gone: %v", err)
	p, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, renamed.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, p.DeletionTimestamp, "the pod created after the grant was not deleted")
	assert.EqualValues(t, 1, st.Evicted)
	assert.EqualValues(t, 1, testutil.ToFloat64(d.metrics.evictions.WithLabelValues("completed")))
	assert.Positive(t, st.Retries, "the other pod's evictions were refused")
}

// A drain evicts critical pods (priority classes system-cluster-critical and
// system-node-critical) only once every other pod is gone, and leaves a DaemonSet pod that
// tolerates every taint, as Karpenter's does: here a budget holds the other pod, and the
// critical one is not evicted until it lets go.
func TestDrainEvictsCriticalPodsLast(t *testing.T) {
	e := newEnv(t, 207)
	node := e.ns + "-node"
	ds := e.daemonSetPod(node)
	e.runningPod("app", node, "held")
	e.budget("held", "held", 0)
	e.pod("dns", node, func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" })
	get := func(name string) *corev1.Pod {
		p, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		require.NoError(t, err)
		return p
	}

	d := e.drainer()
	var st drainStats
	done, err := d.drain(e.ctx, node, drainPolicy{}, time.Now().Add(2*time.Second), &st, d.log, nil)
	require.NoError(t, err)
	assert.False(t, done, "the budget holds the other pod")
	require.NotNil(t, get("app"))
	if dns := get("dns"); assert.NotNil(t, dns, "the critical pod was not evicted while another pod is still to go") {
		assert.Nil(t, dns.DeletionTimestamp)
	}

	require.NoError(t, e.kube.PolicyV1().PodDisruptionBudgets(e.ns).Delete(e.ctx, "held", metav1.DeleteOptions{}))
	d = e.drainer()
	var order []string
	done, err = d.drain(e.ctx, node, drainPolicy{}, time.Now().Add(30*time.Second), &st, d.log, func(r drainRound) {
		if len(order) == 0 || order[len(order)-1] != strings.Join(r.Pods, ",") {
			order = append(order, strings.Join(r.Pods, ","))
		}
	})
	require.NoError(t, err)
	assert.True(t, done)
	assert.Equal(t, []string{e.ns + "/app," + e.ns + "/dns", e.ns + "/dns", ""}, order, "the other pod went first, then the critical one")
	assert.Nil(t, get("dns"))
	if ds := get(ds.Name); assert.NotNil(t, ds, "the DaemonSet pod tolerating karpenter.sh/disrupted is left") {
		assert.Nil(t, ds.DeletionTimestamp)
	}
}

// daemonSetPod registers a Node named node that kwok plays the kubelet of, runs a DaemonSet
// tolerating every taint on it with the volumes, and returns the DaemonSet's pod there once the
// controller made it.
func (e *env) daemonSetPod(node string, volumes ...corev1.Volume) *corev1.Pod {
	e.t.Helper()
	e.kwokNode(node)
	return e.daemonSet(node, "agent", func(s *corev1.PodSpec) {
		s.Volumes, s.Tolerations = volumes, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	})
}

// kwokNode registers a Node named node that kwok plays the kubelet of, labelled for the test's
// DaemonSets.
func (e *env) kwokNode(node string) {
	e.t.Helper()
	n, err := e.kube.CoreV1().Nodes().Create(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
		Labels: map[string]string{"fleetwright.io/test": e.ns}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { e.remove(e.dyn.Resource(corev1.SchemeGroupVersion.WithResource("nodes")), n.Name) })
}

// daemonSet runs a DaemonSet named name (mutate edits its pod spec) on the test's kwok node and
// returns its pod there once the controller made it.
func (e *env) daemonSet(node, name string, mutate func(*corev1.PodSpec)) *corev1.Pod {
	e.t.Helper()
	labels := map[string]string{"fleetwright.io/test": e.ns, "fleetwright.io/daemonset": name}
	spec := corev1.PodSpec{NodeSelector: map[string]string{"fleetwright.io/test": e.ns}, TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []corev1.Container{{Name: "c", Image: "pause"}}}
	if mutate != nil {
		mutate(&spec)
	}
	_, err := e.kube.AppsV1().DaemonSets(e.ns).Create(e.ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}},
		metav1.CreateOptions{})
	require.NoError(e.t, err)
	var ds *corev1.Pod
	require.Eventually(e.t, func() bool {
		pods, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "fleetwright.io/daemonset=" + name})
		require.NoError(e.t, err)
		for i := range pods.Items {
			if pods.Items[i].Spec.NodeName == node {
				ds = &pods.Items[i]
			}
		}
		return ds != nil
	}, time.Minute, 100*time.Millisecond, "DaemonSet %s runs a pod on %s", name, node)
	return ds
}

// A drain evicts in Karpenter v1's four groups, each once every pod of the groups before it is
// gone: other pods, DaemonSet pods, critical pods, critical DaemonSet pods; a DaemonSet pod that
// tolerates every taint (karpenter.sh/disrupted too) is neither evicted nor waited for.
// Karpenter's "Termination should drain pods on a node in order" waited forever for the
// DaemonSet pod: the drain left every DaemonSet pod.
func TestDrainEvictsInKarpentersFourGroups(t *testing.T) {
	e := newEnv(t, 209)
	node := e.ns + "-node"
	e.kwokNode(node)
	everywhere := e.daemonSet(node, "everywhere", func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} })
	agent := e.daemonSet(node, "agent", nil)
	proxy := e.daemonSet(node, "proxy", func(s *corev1.PodSpec) { s.PriorityClassName = "system-node-critical" })
	e.runningPod("app", node, "app")
	e.runningPod("dns", node, "dns", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" })
	// As the executor does before a drain: the DaemonSet controller puts no pod back.
	_, err := e.kube.CoreV1().Nodes().Patch(e.ctx, node, types.StrategicMergePatchType,
		[]byte(`{"spec":{"taints":[{"key":"`+karpv1.DisruptedTaintKey+`","effect":"NoSchedule"}]}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	d := e.drainer()
	var st drainStats
	var order []string
	done, err := d.drain(e.ctx, node, drainPolicy{}, time.Now().Add(time.Minute), &st, d.log, func(r drainRound) {
		pods := slices.Sorted(slices.Values(r.Pods))
		if len(order) == 0 || order[len(order)-1] != strings.Join(pods, ",") {
			order = append(order, strings.Join(pods, ","))
		}
	})
	require.NoError(t, err)
	assert.True(t, done)
	name := func(names ...string) string {
		for i := range names {
			names[i] = e.ns + "/" + names[i]
		}
		return strings.Join(slices.Sorted(slices.Values(names)), ",")
	}
	assert.Equal(t, []string{
		name("app", agent.Name, "dns", proxy.Name),
		name(agent.Name, "dns", proxy.Name),
		name("dns", proxy.Name),
		name(proxy.Name),
		"",
	}, order, "other pods, then DaemonSet pods, then critical pods, then critical DaemonSet pods")
	p, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, everywhere.Name, metav1.GetOptions{})
	require.NoError(t, err, "the DaemonSet pod that tolerates every taint is left")
	assert.Nil(t, p.DeletionTimestamp)
}

// listCounter counts the LISTs (not watches) of VolumeAttachments a client makes.
type listCounter struct {
	next  http.RoundTripper
	lists atomic.Int32
}

func (c *listCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/volumeattachments") && r.URL.Query().Get("watch") != "true" {
		c.lists.Add(1)
	}
	return c.next.RoundTrip(r)
}

// A drained node's termination waits for the VolumeAttachments of the volumes its pods used,
// not for those of the pods no drain moves (a DaemonSet's: they stay attached until the
// instance goes); and waiting does not LIST the cluster's VolumeAttachments round after round.
func TestDrainWaitsOnlyForVolumesOfPodsItMoves(t *testing.T) {
	e := newEnv(t, 208)
	node := e.ns + "-node"
	vas := e.kube.StorageV1().VolumeAttachments()
	// volume makes a bound persistent volume for the pod (kube-scheduler places no pod whose claim
	// is unbound) and attaches it to the node.
	volume := func(pod, pv string) {
		_, err := e.kube.CoreV1().PersistentVolumes().Create(e.ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv},
			Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				ClaimRef:               &corev1.ObjectReference{Namespace: e.ns, Name: pod + "-data"},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-" + pv}}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = e.kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv, metav1.DeleteOptions{})
		})
		_, err = e.kube.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: pod + "-data"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = vas.Create(e.ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + pod},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: node,
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv)}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = vas.Delete(context.Background(), e.ns+"-"+pod, metav1.DeleteOptions{}) })
	}
	mounts := func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.Name + "-data"}}}}
	}
	volume("ds", "pv-"+e.ns+"-ds")
	e.daemonSetPod(node, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ds-data"}}})
	volume("app", "pv-"+e.ns+"-app")
	e.pod("app", node, mounts)

	rc, err := e2e.Cluster(t).RESTConfig()
	require.NoError(t, err)
	counter := &listCounter{}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	d := e.drainer()
	d.cs = cs
	var waited []string
	d.between = func(n int) {
		if n == 8 {
			require.NoError(t, vas.Delete(e.ctx, e.ns+"-app", metav1.DeleteOptions{}))
		}
	}
	var st drainStats
	done, err := d.drain(e.ctx, node, drainPolicy{}, time.Now().Add(30*time.Second), &st, d.log, func(r drainRound) {
		if r.PodsGone && len(r.Volumes) > 0 {
			waited = r.Volumes
		}
	})
	require.NoError(t, err)
	assert.True(t, done, "the drain ends with the DaemonSet's volume still attached")
	assert.Equal(t, []string{e.ns + "-app"}, waited, "it waited for the evicted pod's volume only")
	_, err = vas.Get(e.ctx, e.ns+"-ds", metav1.GetOptions{})
	assert.NoError(t, err, "the DaemonSet pod's attachment is still there")
	assert.GreaterOrEqual(t, len(d.pauses), 8, "the drain waited several rounds for the volume")
	assert.LessOrEqual(t, counter.lists.Load(), int32(1), "VolumeAttachments were listed once, not every round")
	t.Logf("%d rounds, %d LISTs of VolumeAttachments", len(d.pauses)+1, counter.lists.Load())
}
