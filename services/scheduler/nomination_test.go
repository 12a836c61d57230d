package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// Issue 17: nominations are hints with an end, and while they hold they hold room.
//
//	full-claim  → full-node  (500m allocatable, ready 1 min ago): "stale" pods nominated a minute
//	                          ago; the grace is over, so they are scheduled again, told why, and
//	                          get a claim of their own
//	roomy-claim → roomy-node (2 CPU, ready now): "held" pods nominated now fill it; the stale
//	                          pods must not be planned onto the room promised to them
//	inflight-claim (launched, no node): "waiting" pod nominated to it is left alone
func TestNominationsEndAndHoldRoom(t *testing.T) {
	e := newEnv(t, "sched-nominations", v1Example)
	stale := e.pendingPods("stale", 2, "1")
	held := e.pendingPods("held", 2, "1")
	waiting := e.pendingPods("waiting", 1, "1")
	now := time.Now().UTC().Truncate(time.Second)
	e.readyClaim("full-claim", "full-node", "500m", now.Add(-time.Minute))
	e.readyClaim("roomy-claim", "roomy-node", "2", now)
	e.createClaim("inflight-claim", true)
	e.nominateTo(stale, "full-claim", now.Add(-time.Minute))
	e.nominateTo(held, "roomy-claim", now)
	e.nominateTo(waiting, "inflight-claim", now)
	// Started now, the scheduler's caches begin from a list that shows all of the above.
	e.start("nominations", "--nomination-grace", "30s")

	all := append(append(e.refresh(stale), e.refresh(held)...), e.refresh(waiting)...)
	e.publishBatch("nominations-1", all)
	e.batchesDone(1)

	fresh := map[string]bool{}
	for _, c := range e.nodeClaims() {
		// Made at takeover (the pods were waiting when the scheduler started) or for the batch.
		if b := c.Annotations[batchAnnotation]; b == "nominations-1" || strings.HasPrefix(b, "takeover-") {
			fresh[c.Name] = true
		}
	}
	require.NotEmpty(t, fresh, "the stale pods get new capacity")
	for _, p := range e.refresh(stale) {
		assert.True(t, fresh[e.nominatedTo(p)],
			"pod %s is nominated to a new claim (%s), not to the full node or the room promised on the roomy one", p.Name, e.nominatedTo(p))
	}
	e.eventsSay(stale, reasonFailedScheduling, "Scheduling pod again: nominated to nodeclaim/full-claim")
	e.assertNominatedTo(held, "roomy-claim", "a live nomination is left alone")
	e.assertNominatedTo(waiting, "inflight-claim", "a live nomination is left alone")
	for _, m := range e.podEvents(held[0], reasonFailedScheduling) {
		assert.NotContains(t, m, "Scheduling pod again", "a pod whose nomination holds is not told it ended")
	}
	assert.Contains(t, e.logs.String(), "found 2 provisionable pod(s)", "only the stale pods needed capacity")
	assert.Contains(t, e.logs.String(), "scheduling 2 pod(s) again: their nomination ended")
}

// readyClaim makes a launched claim whose node registered and became ready at readyAt: a Node
// with the given CPU (tainted uninitialized, so kube-scheduler leaves it alone; the scheduler
// ignores that taint as the node lifecycle's own) and the claim's Initialized condition.
func (e *env) readyClaim(claim, node, cpu string, readyAt time.Time) {
	e.t.Helper()
	nc := e.createClaim(claim, true)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{
		karpv1.NodePoolLabelKey: "default", corev1.LabelInstanceTypeStable: "t4g.medium", corev1.LabelTopologyZone: "us-east-1a",
		karpv1.CapacityTypeLabelKey: "on-demand", corev1.LabelArchStable: "arm64", corev1.LabelOSStable: "linux"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}}
	_, err := e.kube.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = e.kube.CoreV1().Nodes().Delete(e.ctx, node, metav1.DeleteOptions{}) })
	rl := fmt.Sprintf(`{"cpu":%q,"memory":"4Gi","pods":"110"}`, cpu)
	patch := fmt.Sprintf(`{"status":{"capacity":%s,"allocatable":%s}}`, rl, rl)
	_, err = e.kube.CoreV1().Nodes().Patch(e.ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	require.NoError(e.t, err)

	e.updateClaimStatus(nc.Name, func(cur *karpv1.NodeClaim) {
		cur.Status.NodeName = node
		cur.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized",
			LastTransitionTime: metav1.NewTime(readyAt)})
	})
}

// nominateTo records the pods' nominations on the claim as the scheduler does.
func (e *env) nominateTo(pods []*corev1.Pod, claim string, at time.Time) {
	e.t.Helper()
	var noms []podproj.PodNomination
	for _, p := range pods {
		noms = append(noms, podproj.PodNomination{UID: string(p.UID), Pod: p.Namespace + "/" + p.Name, At: at})
	}
	e.patch(clusterstate.NodeClaims, claim, string(podproj.NominationPatch(noms)))
}

// refresh reads the pods again.
func (e *env) refresh(pods []*corev1.Pod) []*corev1.Pod {
	e.t.Helper()
	out := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		got, err := e.kube.CoreV1().Pods(p.Namespace).Get(e.ctx, p.Name, metav1.GetOptions{})
		require.NoError(e.t, err)
		out = append(out, got)
	}
	return out
}

// A ready node that kube-scheduler filled with other pods cannot honour every nomination to it:
// the leader ends the ones that do not fit (oldest nomination kept first) without waiting for
// the grace, says why on the claim, and a new nomination to another claim takes over; the
// record of a pod that is bound is removed.
func TestNominationsANodeCannotHonourEnd(t *testing.T) {
	e := newEnv(t, "sched-overflow", v1Example)
	held := e.pendingPods("held", 2, "1")
	now := time.Now().UTC().Truncate(time.Second)
	e.readyClaim("crowded-claim", "crowded-node", "2", now)
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: e.ns}, Spec: corev1.PodSpec{
		NodeName:   "crowded-node",
		Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	foreign, err := e.kube.CoreV1().Pods(e.ns).Create(e.ctx, foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	e.nominateTo(held[:1], "crowded-claim", now.Add(-10*time.Second))
	e.nominateTo(held[1:], "crowded-claim", now)
	// A record of a pod that is bound by now (to this node, as it happens): it no longer matters.
	e.nominateTo([]*corev1.Pod{foreign}, "crowded-claim", now.Add(-time.Minute))
	e.start("overflow", "--nomination-grace", "1h", "--nomination-check", "200ms")
	require.Eventually(t, func() bool { return e.nominationOf(foreign).Claim == "" }, time.Minute, 100*time.Millisecond,
		"the record of the bound pod is removed from the claim")

	require.Eventually(t, func() bool {
		return e.nominationOf(held[1]).Ended != ""
	}, time.Minute, 100*time.Millisecond, "the newer nomination, which no longer fits, is ended")
	ended := e.refresh(held)
	assert.Contains(t, e.nominationOf(held[1]).Ended, "its node crowded-node (nodeclaim/crowded-claim) has no room left for it")
	assert.Empty(t, e.nominationOf(held[0]).Ended, "the older nomination fits in what the foreign pod left")

	e.publishBatch("overflow-1", ended)
	e.eventsSay(held[1:], reasonFailedScheduling, "Scheduling pod again: its node crowded-node (nodeclaim/crowded-claim) has no room left for it")
	require.Eventually(t, func() bool {
		n := e.nominationOf(held[1])
		return n.Claim != "crowded-claim" && n.Ended == ""
	}, time.Minute, 100*time.Millisecond, "scheduled again onto new capacity: its latest nomination is a live one")
	assert.Equal(t, "crowded-claim", e.nominatedTo(held[0]), "the live nomination is left alone")
}

// Issue 30: a node that takes thousands of tiny pods never makes a NodeClaim write fail. One
// claim records the nominations of as many pods as its budget (podproj.NominationBudget, 64 KiB)
// takes, and plans no more onto it; the others, offered again, get claims of their own, and every
// pod ends up covered by a claim's record. Here 700 pods whose records weigh about 220 bytes each
// (long namespace and names) would take 150 KB on one claim; a few hundred more (more than this
// machine's controller-manager makes within the harness's minute) would take more than the
// 256 KiB Kubernetes allows all of an object's annotations, and the claim's create would fail.
func TestNominationRecordsStayWithinTheirBudget(t *testing.T) {
	e := newEnv(t, "sched-budget-with-a-namespace-name-as-long-as-some-clusters", v1Example)
	e.patch(clusterstate.NodeClasses, "default", `{"spec":{"kubelet":{"maxPods":800}}}`)
	e.start("budget")
	pods := e.pendingPods("tiny-pods-with-a-name-as-long-as-a-deployment-name-can-make-it", 700, "1m")

	covered := func() (byUID map[string]string, claims []karpv1.NodeClaim) {
		claims = e.nodeClaims()
		byUID = map[string]string{}
		for i := range claims {
			assert.LessOrEqual(t, podproj.RecordsSize(claims[i].Annotations), podproj.NominationBudget,
				"nodeclaim %s records its nominations within the budget", claims[i].Name)
			for _, n := range podproj.NominationsOn(&claims[i]) {
				byUID[n.UID] = n.Claim
			}
		}
		return byUID, claims
	}
	// As pod-watcher does: offer the pods no claim records, until none is left.
	batches := uint64(0)
	for round := 1; ; round++ {
		byUID, _ := covered()
		var left []*corev1.Pod
		for _, p := range pods {
			if byUID[string(p.UID)] == "" {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			break
		}
		require.LessOrEqual(t, round, 10, "%d pod(s) still without a nomination", len(left))
		batches++
		e.publishBatch(fmt.Sprintf("budget-%d", round), left)
		e.batchesDone(batches)
	}
	_, claims := covered()
	assert.Greater(t, len(claims), 1, "one claim could not record them all")

	// Covered: offered again, the pods need no capacity.
	batches++
	e.publishBatch("budget-again", pods)
	e.batchesDone(batches)
	_, again := covered()
	assert.Len(t, again, len(claims), "no claim for pods a claim's record covers")
}

// Issue 30: the nomination check follows changes rather than a clock. With its interval an
// hour, a pod bound after the scheduler started to the node of a claim that pods are nominated
// to starts the check, which ends the nomination that no longer fits.
func TestNominationCheckFollowsChanges(t *testing.T) {
	e := newEnv(t, "sched-check-kicked", v1Example)
	e.start("check-kicked", "--nomination-grace", "1h", "--nomination-check-interval", "1h")
	held := e.pendingPods("held", 2, "1")
	now := time.Now().UTC().Truncate(time.Second)
	e.readyClaim("kicked-claim", "kicked-node", "2", now)
	e.nominateTo(held[:1], "kicked-claim", now.Add(-10*time.Second))
	e.nominateTo(held[1:], "kicked-claim", now)
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: e.ns}, Spec: corev1.PodSpec{
		NodeName:   "kicked-node",
		Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	_, err := e.kube.CoreV1().Pods(e.ns).Create(e.ctx, foreign, metav1.CreateOptions{})
	require.NoError(t, err)

	require.Eventually(t, func() bool { return e.nominationOf(held[1]).Ended != "" }, time.Minute, 100*time.Millisecond,
		"the nomination that no longer fits is ended without waiting for the interval")
	assert.Contains(t, e.nominationOf(held[1]).Ended, "its node kicked-node (nodeclaim/kicked-claim) has no room left for it")
	assert.Empty(t, e.nominationOf(held[0]).Ended, "the older nomination fits in what the foreign pod left")
}

// Issue 30: kube-scheduler is the judge of whether a nominated pod still fits its claim's node.
// Here the node, once its startup taint is lifted, holds a pod the nominated one is anti-affine
// to (by hostname): kube-scheduler tries the pod there and cannot place it, and the leader ends
// the nomination at once (the grace, 10 min, cannot be what ends it), saying why; offered again,
// the pod gets a claim of its own.
func TestNominationEndsWhenKubeSchedulerCannotPlaceThePod(t *testing.T) {
	e := newEnv(t, "sched-refused", v1Example)
	e.start("refused", "--nomination-grace", "10m")
	anti := e.pendingPods("anti", 1, "1", antiAffine("anti"))
	e.takingClaim("refused-claim", "refused-node", map[string]string{"app": "anti"})
	e.nominateTo(anti, "refused-claim", time.Now().UTC().Add(-30*time.Second))
	e.untaint("refused-node")

	require.Eventually(t, func() bool { return e.nominationOf(anti[0]).Ended != "" }, time.Minute, 100*time.Millisecond,
		"the nomination of the pod kube-scheduler cannot place on the node is ended before the grace")
	assert.Contains(t, e.nominationOf(anti[0]).Ended, "kube-scheduler tried it on its node refused-node (nodeclaim/refused-claim) once the node took pods, and could not place it there")

	e.publishBatch("refused-1", e.refresh(anti))
	require.Eventually(t, func() bool {
		n := e.nominationOf(anti[0])
		return n.Claim != "" && n.Claim != "refused-claim" && n.Ended == ""
	}, time.Minute, 100*time.Millisecond, "offered again, the pod is nominated to a claim of its own")
}

// Issue 30: a node whose claim says it is initialized, but that still carries a startup taint,
// is not yet one kube-scheduler can judge the pod on: its refusals (the taint, in its message)
// do not end the nomination.
func TestNominationHoldsWhileItsNodeIsTainted(t *testing.T) {
	e := newEnv(t, "sched-tainted", v1Example)
	e.start("tainted", "--nomination-grace", "10m", "--nomination-check", "200ms")
	anti := e.pendingPods("anti", 1, "1", antiAffine("anti"))
	e.takingClaim("tainted-claim", "tainted-node", map[string]string{"app": "anti"})
	e.nominateTo(anti, "tainted-claim", time.Now().UTC().Add(-30*time.Second))

	require.Eventually(t, func() bool {
		for _, c := range e.refresh(anti)[0].Status.Conditions {
			if c.Type == corev1.PodScheduled && strings.Contains(c.Message, startupTaint.Key) {
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "kube-scheduler tries the pod with the tainted node there, and refuses it")
	require.Never(t, func() bool { return e.nominationOf(anti[0]).Ended != "" }, 5*time.Second, 100*time.Millisecond,
		"the nomination holds while the node carries its startup taint")
	assert.Equal(t, "tainted-claim", e.nominatedTo(anti[0]))
}

// startupTaint is the claims' startup taint in the tests of kube-scheduler's refusals.
var startupTaint = corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}

// antiAffine makes a pod that no pod labelled app=app may share a node with (its own pods
// included).
func antiAffine(app string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: corev1.LabelHostname}}}}
	}
}

// takingClaim makes the claim and its node as kube-scheduler sees one the
// launcher has linked: played by kwok (Ready), labelled with its hostname, carrying the claim's
// startup taint, and already running a pod labelled with the given labels. The claim says its
// node is initialized.
func (e *env) takingClaim(claim, node string, labels map[string]string) {
	e.t.Helper()
	e.createClaim(claim, true, func(nc *karpv1.NodeClaim) { nc.Spec.StartupTaints = []corev1.Taint{startupTaint} })
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}, Labels: map[string]string{
		karpv1.NodePoolLabelKey: "default", corev1.LabelInstanceTypeStable: "t4g.xlarge", corev1.LabelTopologyZone: "us-east-1a", corev1.LabelHostname: node,
		karpv1.CapacityTypeLabelKey: "on-demand", corev1.LabelArchStable: "arm64", corev1.LabelOSStable: "linux"}},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{startupTaint}},
		Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl}}
	_, err := e.kube.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = e.kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: node + "-tenant", Namespace: e.ns, Labels: labels}, Spec: corev1.PodSpec{
		NodeName: node, Tolerations: []corev1.Toleration{{Key: startupTaint.Key, Operator: corev1.TolerationOpExists}},
		Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
	_, err = e.kube.CoreV1().Pods(e.ns).Create(e.ctx, bound, metav1.CreateOptions{})
	require.NoError(e.t, err)
	require.Eventually(e.t, func() bool {
		got, err := e.kube.CoreV1().Nodes().Get(e.ctx, node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "kwok makes node %s Ready", node)
	e.updateClaimStatus(claim, func(cur *karpv1.NodeClaim) {
		cur.Status.NodeName = node
		cur.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized",
			LastTransitionTime: metav1.Now()})
	})
}

// untaint lifts the node's taints, as the agent that owns a startup taint does.
func (e *env) untaint(node string) {
	e.t.Helper()
	_, err := e.kube.CoreV1().Nodes().Patch(e.ctx, node, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{})
	require.NoError(e.t, err)
}
