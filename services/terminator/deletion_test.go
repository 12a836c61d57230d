package main

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// terminationGracePeriod is the claim's spec.terminationGracePeriod, as the scheduler copies it
// from the NodePool.
func terminationGracePeriod(d time.Duration) func(*karpv1.NodeClaim) {
	return func(nc *karpv1.NodeClaim) { nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: d} }
}

// deleteByHand deletes a claim as kubectl does, once the termination finalizer holds it.
func (e *env) deleteByHand(claim string) {
	e.t.Helper()
	res := e.dyn.Resource(clusterstate.NodeClaims)
	require.NoError(e.t, retry.RetryOnConflict(retry.DefaultRetry, func() error { // the terminator may add it meanwhile
		u, err := res.Get(e.ctx, claim, metav1.GetOptions{})
		if err != nil || finalized(u) {
			return err
		}
		u.SetFinalizers(append(u.GetFinalizers(), karpv1.TerminationFinalizer))
		_, err = res.Update(e.ctx, u, metav1.UpdateOptions{})
		return err
	}))
	require.NoError(e.t, res.Delete(e.ctx, claim, metav1.DeleteOptions{}))
}

// decided records a disruption decision of the given reason on the claim, as the scheduler's
// leader does before it deletes a claim (the terminator refuses a decided reason's intent for a
// claim nobody deleted).
func decided(reason karpv1.DisruptionReason) func(*karpv1.NodeClaim) {
	return func(nc *karpv1.NodeClaim) {
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[disruption.DecisionAnnotation] = disruption.Decision{ID: "test/" + nc.Name, Reason: reason,
			Action: disruption.ActionDelete, Claims: []string{nc.Name}, Why: "decided for the test", DecidedAt: time.Now()}.Value()
	}
}

// deletingClaim waits until the claim is being deleted and records its termination deadline,
// and returns it then.
func (e *env) deletingClaim(name string) *karpv1.NodeClaim {
	e.t.Helper()
	var nc karpv1.NodeClaim
	require.Eventually(e.t, func() bool {
		u, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, name, metav1.GetOptions{})
		require.NoError(e.t, err, "the claim is there while its pods drain")
		nc = karpv1.NodeClaim{}
		require.NoError(e.t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc))
		return nc.DeletionTimestamp != nil && nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] != ""
	}, wait, tick, "nodeclaim %s is deleting and records its deadline", name)
	return &nc
}

// firstDeletions watches the test's pods and returns what each pod looked like when it was
// first seen terminating: its deletionTimestamp and the grace period of its deletion.
func (e *env) firstDeletions() func(name string) *corev1.Pod {
	e.t.Helper()
	w, err := e.kube.CoreV1().Pods(e.ns).Watch(e.ctx, metav1.ListOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(w.Stop)
	var mu sync.Mutex
	first := map[string]*corev1.Pod{}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.DeletionTimestamp == nil {
				continue
			}
			mu.Lock()
			if first[p.Name] == nil {
				first[p.Name] = p
			}
			mu.Unlock()
		}
	}()
	return func(name string) *corev1.Pod {
		mu.Lock()
		defer mu.Unlock()
		return first[name]
	}
}

// eventSays reports whether the terminator recorded an event of the reason, saying want, on the
// object.
func (e *env) eventSays(ns, object, reason, want string) bool {
	evs, err := e.kube.CoreV1().Events(ns).List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + object})
	return err == nil && slices.ContainsFunc(evs.Items, func(ev corev1.Event) bool {
		return ev.Reason == reason && strings.Contains(ev.Message, want) && ev.Source.Component == "fleetwright-terminator"
	})
}

func withGrace(s int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(s) }
}

func withDoNotDisrupt(p *corev1.Pod) {
	p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
}

// deadlineOf reads the deadline a claim records.
func deadlineOf(t *testing.T, nc *karpv1.NodeClaim) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey])
	require.NoError(t, err)
	return at
}

// deletedForDeadline checks how a pod the drain deleted for the deadline was first seen
// terminating: with a grace period of at least a second and at most its own, ending by the
// deadline (deletionTimestamp is the deletion plus its grace; both are whole seconds).
func deletedForDeadline(t *testing.T, p *corev1.Pod, own int64, deadline time.Time) {
	t.Helper()
	require.NotNil(t, p.DeletionGracePeriodSeconds)
	assert.GreaterOrEqual(t, *p.DeletionGracePeriodSeconds, int64(1), "pod %s was deleted with grace 0", p.Name)
	assert.LessOrEqual(t, *p.DeletionGracePeriodSeconds, own, "pod %s got no more than its own grace", p.Name)
	assert.WithinRange(t, p.DeletionTimestamp.Time, deadline.Add(-time.Second), deadline,
		"pod %s was deleted at the deadline less its own grace, so it ended at the deadline", p.Name)
}

// A drift decided a minute before its NodeClaim is deleted (its replacement took that long to
// boot) drains within the terminationGracePeriod counted from the deletion, not from the
// decision the intent carries: the claim records deletionTimestamp + 20 s; the pod a
// PodDisruptionBudget holds is deleted at that deadline less its own 15 s, with the time left
// as its grace (never 0); the Node and NodeClaim say so (TerminationGracePeriodExpiring), the
// pod too (Disrupted).
func TestDrainDeadlineCountsFromTheDeletion(t *testing.T) {
	e := newEnv(t, 210)
	inst := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand)
	n := e.node(inst)
	nc := e.claim("deadline-a", inst, n.Name, terminationGracePeriod(20*time.Second), decided(karpv1.DisruptionReasonDrifted))
	e.budget("held", "guarded", 0)
	e.runningPod("guarded", n.Name, "guarded", withGrace(15))
	deletions := e.firstDeletions()
	e.run("--drain-slice", "10s")
	e.deleteByHand(nc.Name) // as the scheduler does once the replacements are initialized

	decidedAt := time.Now().Add(-time.Minute)
	in := &terminationv1.TerminationIntent{IntentId: string(nc.UID) + "/drifted", NodeClaimName: nc.Name, NodeName: n.Name,
		InstanceId: inst.ID, ProviderId: providerID(inst), NodePoolName: "default", Reason: commonv1.TerminationReason_TERMINATION_REASON_DRIFTED,
		Voluntary: true, RequestTime: timestamppb.New(decidedAt), GracePeriod: durationpb.New(20 * time.Second), Why: "drifted for the test"}
	require.NoError(t, e.conn.Publish(e.ctx, intentsSubject(), in, in.GetIntentId()))

	deleting := e.deletingClaim(nc.Name)
	deadline := deadlineOf(t, deleting)
	assert.Equal(t, deleting.DeletionTimestamp.Add(20*time.Second).UTC(), deadline, "the deadline counts from the deletion, not from the decision")
	require.Eventually(t, func() bool { return deletions("guarded") != nil }, wait, tick, "the held pod is deleted by the deadline")
	deletedForDeadline(t, deletions("guarded"), 15, deadline)
	assert.False(t, e.eventSays(e.ns, "guarded", reasonEvicted, ""), "the budget held: the pod was never evicted")
	require.Eventually(t, func() bool {
		return e.eventSays(e.ns, "guarded", reasonDisrupted, "grace period of") &&
			e.eventSays("default", nc.Name, reasonGraceExpiring, "All pods will be deleted by "+deadline.Format(time.RFC3339)) &&
			e.eventSays("default", n.Name, reasonGraceExpiring, e.ns+"/guarded") && e.eventSays("default", nc.Name, reasonGraceExpiring, e.ns+"/guarded")
	}, wait, tick, "the pod, the node and the claim say the grace period ran out")
	require.Eventually(t, func() bool {
		_, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, nc.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, wait, tick, "the claim goes")
	assert.Contains(t, []string{"shutting-down", "terminated"}, e.instance(inst.ID).State)
}

// A NodeClaim deleted by hand holds its karpenter.sh/do-not-disrupt pods as Karpenter v1 does:
// they are not evicted (the others are, at once); with a terminationGracePeriod each is deleted
// at its end less the pod's own grace, so the node goes in time; without one the drain waits for
// the pod as long as it takes, and says why.
func TestDeletedByHandHoldsDoNotDisruptPods(t *testing.T) {
	e := newEnv(t, 209)
	bounded, unbounded := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand), e.launch(ec2types.DefaultTargetCapacityTypeOnDemand)
	bn, un := e.node(bounded), e.node(unbounded)
	bc, uc := e.claim("by-hand-bounded", bounded, bn.Name, terminationGracePeriod(20*time.Second)), e.claim("by-hand-unbounded", unbounded, un.Name)
	e.pod("keep", bn.Name, func(p *corev1.Pod) { withDoNotDisrupt(p); withGrace(10)(p) })
	e.pod("app", bn.Name, nil)
	e.pod("forever", un.Name, withDoNotDisrupt)
	deletions := e.firstDeletions()
	e.run("--drain-slice", "10s")
	e.deleteByHand(bc.Name)
	e.deleteByHand(uc.Name)

	require.Eventually(t, func() bool { return e.eventSays(e.ns, "app", reasonEvicted, bn.Name) }, wait, tick, "the other pod is evicted at once")
	require.Never(t, func() bool { return deletions("keep") != nil }, 2*time.Second, tick, "the do-not-disrupt pod is not evicted with the other")
	deleting := e.deletingClaim(bc.Name)
	deadline := deadlineOf(t, deleting)
	assert.Equal(t, deleting.DeletionTimestamp.Add(20*time.Second).UTC(), deadline)
	require.Eventually(t, func() bool {
		return e.eventSays("default", bc.Name, reasonDisruptionBlocked, e.ns+"/keep; they are deleted by the termination grace period's end, "+
			deadline.Format(time.RFC3339)) &&
			e.eventSays("default", uc.Name, reasonDisruptionBlocked, e.ns+"/forever; the NodeClaim has no terminationGracePeriod, so the drain waits")
	}, wait, tick, "both claims say which pod they hold and until when")

	require.Eventually(t, func() bool { return deletions("keep") != nil }, wait, tick, "the held pod is deleted by the deadline")
	assert.False(t, e.eventSays(e.ns, "keep", reasonEvicted, ""), "the do-not-disrupt pod was never evicted")
	deletedForDeadline(t, deletions("keep"), 10, deadline)
	require.Eventually(t, func() bool {
		_, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, bc.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, wait, tick, "the bounded claim goes")
	assert.Contains(t, []string{"shutting-down", "terminated"}, e.instance(bounded.ID).State)

	// Past the other's deadline the unbounded claim still waits for its pod, which no one deleted.
	p, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, "forever", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, p.DeletionTimestamp, "the do-not-disrupt pod on the claim without a terminationGracePeriod is left be")
	assert.Equal(t, "running", e.instance(unbounded.ID).State)
	require.NoError(t, e.kube.CoreV1().Pods(e.ns).Delete(e.ctx, "forever", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, uc.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, wait, tick, "once the pod is gone, the unbounded claim goes")
	assert.Contains(t, []string{"shutting-down", "terminated"}, e.instance(unbounded.ID).State)
}
