package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// nodePool creates a NodePool that empties its nodes at once, with the given budgets (JSON).
func (e *env) nodePool(name, budgets string) { e.nodePoolAfter(name, "0s", budgets) }

// nodePoolAfter creates a NodePool that empties its nodes after consolidateAfter.
func (e *env) nodePoolAfter(name, consolidateAfter, budgets string) {
	e.t.Helper()
	var obj map[string]any
	require.NoError(e.t, json.Unmarshal([]byte(fmt.Sprintf(`{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":%q},"spec":{
		"template":{"spec":{"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},"requirements":[]}},
		"disruption":{"consolidationPolicy":"WhenEmpty","consolidateAfter":%q,"budgets":%s}}}`, name, consolidateAfter, budgets)), &obj))
	res := e.dyn.Resource(clusterstate.NodePools)
	_, err := res.Create(e.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { e.remove(res, name) })
}

// emptyNode launches an instance and registers it as an initialized, empty node of the pool,
// with its NodeClaim, as the launcher leaves them.
func (e *env) emptyNode(pool, claim string) *karpv1.NodeClaim {
	e.t.Helper()
	return e.emptyNodeOf(pool, claim, map[string]string{"kwok.x-k8s.io/node": "fake"})
}

// emptyNodeOf is emptyNode with the node's annotations: without kwok's, no kubelet heartbeat
// updates the node.
func (e *env) emptyNodeOf(pool, claim string, annotations map[string]string) *karpv1.NodeClaim {
	e.t.Helper()
	inst := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand)
	node := e.node(inst, func(n *corev1.Node) { n.Annotations, n.Labels[karpv1.NodePoolLabelKey] = annotations, pool })
	nc := e.claimIn(pool, claim, inst, node.Name)
	e.conditionsAt(nc, time.Now(), karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized)
	return nc
}

// A pool's budget of one node lets its empty nodes go one at a time: watching the pool's nodes,
// never more than one is tainted karpenter.sh/disrupted at once (the next is tainted only after
// the last is deleted), and all three go in the end, oldest first, each told meanwhile which
// budget holds it.
func TestEmptyNodesGoOneAtATimeUnderABudgetOfOne(t *testing.T) {
	e := newEnv(t, 301)
	const pool = "budget-one"
	e.nodePool(pool, `[{"nodes":"1"}]`)
	var claims []*karpv1.NodeClaim
	for _, name := range []string{"budget-a", "budget-b", "budget-c"} {
		claims = append(claims, e.emptyNode(pool, name))
	}

	// One watch sees every change to the pool's nodes in order.
	w, err := e.kube.CoreV1().Nodes().Watch(e.ctx, metav1.ListOptions{LabelSelector: karpv1.NodePoolLabelKey + "=" + pool, ResourceVersion: "0"})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	tainted, everTainted, deleted, most := map[string]bool{}, map[string]bool{}, map[string]bool{}, 0
	go func() {
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			mu.Lock()
			if ev.Type == watch.Deleted {
				delete(tainted, n.Name)
				deleted[n.Name] = true
			} else if hasDisruptedTaint(n) {
				tainted[n.Name], everTainted[n.Name] = true, true
			} else {
				delete(tainted, n.Name)
			}
			most = max(most, len(tainted))
			mu.Unlock()
		}
	}()

	e.run()
	require.Eventually(t, func() bool {
		for _, nc := range claims {
			if _, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, nc.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return len(deleted) == len(claims)
	}, wait, tick, "all three empty nodes go")
	mu.Lock()
	assert.Equal(t, 1, most, "at most one node of the pool disrupted at a time")
	assert.Len(t, everTainted, 3, "each node was tainted before it went")
	mu.Unlock()

	in := e.intents()
	var order []string
	for _, x := range in {
		assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_EMPTY, x.GetReason())
		if !slices.Contains(order, x.GetNodeClaimName()) {
			order = append(order, x.GetNodeClaimName())
		}
	}
	assert.Equal(t, []string{"budget-a", "budget-b", "budget-c"}, order, "one intent per node, in the order the nodes became empty (then by name)")

	// budget-c waited behind the other two: its events say which budget held it.
	require.Eventually(t, func() bool {
		evs, err := e.kube.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=budget-c"})
		return err == nil && slices.ContainsFunc(evs.Items, func(ev corev1.Event) bool {
			return ev.Reason == reasonDisruptionBlocked && strings.Contains(ev.Message, `budget 0 (nodes "1") allows 1 of 3 nodes (Empty) and 1 is already disrupting`)
		})
	}, wait, tick, "a DisruptionBlocked event on the waiting claim names the budget")
}

// A node launched for a pod is empty until kube-scheduler binds the pod to it: while a pending
// pod's nomination to the node's claim is live, emptiness leaves the node alone (a pool with
// consolidateAfter 0 used to remove it before the pod landed, and the scheduler launched again,
// round after round). Once the pod is gone, the node is empty and goes: the pod's deletion
// wakes the decisions, whose --interval is an hour.
func TestNodeAwaitedByANominatedPodIsNotEmpty(t *testing.T) {
	e := newEnv(t, 307)
	const pool = "awaited"
	e.nodePool(pool, `[{"nodes":"100%"}]`)
	nc := e.emptyNode(pool, "awaited-a")
	pod := e.nominatedTo(nc, "on-its-way", time.Now())

	e.run("--interval", "1h")
	assert.Never(t, func() bool {
		n, err := e.kube.CoreV1().Nodes().Get(e.ctx, nc.Status.NodeName, metav1.GetOptions{})
		return err != nil || hasDisruptedTaint(n) || n.Annotations[emptinessAnnotation] != ""
	}, 5*time.Second, tick, "the node a nominated pod waits for is not taken for empty")

	require.NoError(t, e.kube.CoreV1().Pods(e.ns).Delete(e.ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	require.Eventually(t, func() bool {
		_, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, nc.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, wait, tick, "with the pod gone, the empty node goes")
}

// nominatedTo makes a pending pod kube-scheduler never binds (nothing matches its selector, as
// if it had not got to it yet) and records its nomination to the claim at the given time, as the
// scheduler does.
func (e *env) nominatedTo(nc *karpv1.NodeClaim, name string, at time.Time) *corev1.Pod {
	e.t.Helper()
	pod, err := e.kube.CoreV1().Pods(e.ns).Create(e.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}},
			NodeSelector: map[string]string{"no-such-label": "x"}},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	patch := podproj.NominationPatch([]podproj.PodNomination{{UID: string(pod.UID), Pod: e.ns + "/" + pod.Name, At: at.UTC().Truncate(time.Second)}})
	_, err = e.dyn.Resource(clusterstate.NodeClaims).Patch(e.ctx, nc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(e.t, err)
	return pod
}

// The nomination bounds are the settings pod-watcher and the scheduler read (NOMINATION_GRACE,
// NOMINATION_LIMIT in fleetwright-settings), not podproj's defaults. With a grace of an hour, a
// node initialized ten minutes ago still waits for the pod nominated to it then (at the default
// 20 s it would be empty), while one initialized two hours ago, whose pod's grace is over, is
// empty and goes.
func TestNominationBoundsAreTheSettings(t *testing.T) {
	e := newEnv(t, 313)
	const pool = "bounds"
	e.nodePool(pool, `[{"nodes":"100%"}]`)
	nominatedAt := func(claim string, ago time.Duration) *karpv1.NodeClaim {
		nc := e.emptyNode(pool, claim)
		e.conditionsAt(nc, time.Now().Add(-ago), karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized)
		e.nominatedTo(nc, claim+"-pod", time.Now().Add(-ago))
		return nc
	}
	awaited := nominatedAt("bounds-awaited", 10*time.Minute)
	over := nominatedAt("bounds-over", 2*time.Hour)

	e.run("--interval", "1h", "--nomination-grace", "1h")
	require.Eventually(t, func() bool {
		_, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, over.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, wait, tick, "the node whose pod's grace is over is empty and goes")
	n, err := e.kube.CoreV1().Nodes().Get(e.ctx, awaited.Status.NodeName, metav1.GetOptions{})
	require.NoError(t, err, "the node a pod is still nominated to within the grace stays")
	assert.False(t, hasDisruptedTaint(n))
	assert.Empty(t, n.Annotations[emptinessAnnotation], "it was never taken for empty")
}

// Decisions follow the cluster, not the clock: with --interval an hour, so that after its first
// run at start only a change or a deadline it found wakes the decider, a node that becomes empty
// later goes at once under consolidateAfter 0 (its claim, its node and its emptiness mark are
// changes), and one whose pool waits 3 s is decided on once they are up, with nothing else
// changing: no kubelet (kwok) heartbeat updates that node, and the controller-manager marks a
// node that never reported only after its 60 s startup grace, well after the 20 s this allows.
func TestDecisionsFollowChangesNotTheInterval(t *testing.T) {
	e := newEnv(t, 311)
	e.nodePoolAfter("follow-now", "0s", `[{"nodes":"100%"}]`)
	e.nodePoolAfter("follow-later", "3s", `[{"nodes":"100%"}]`)
	e.run("--interval", "1h")
	claimGone := func(name string) func() bool {
		return func() bool {
			_, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}

	now := e.emptyNode("follow-now", "follow-now-a")
	require.Eventually(t, claimGone(now.Name), wait, tick, "an empty node of a pool with consolidateAfter 0 goes")

	later := e.emptyNodeOf("follow-later", "follow-later-a", nil)
	var marked time.Time
	require.Eventually(t, func() bool {
		n, err := e.kube.CoreV1().Nodes().Get(e.ctx, later.Status.NodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		marked, err = time.Parse(time.RFC3339, n.Annotations[emptinessAnnotation])
		return err == nil
	}, wait, tick, "the empty node is marked")
	var decided *terminationv1.TerminationIntent
	require.Eventually(t, func() bool {
		for _, in := range e.intents() {
			if in.GetNodeClaimName() == later.Name {
				decided = in
			}
		}
		return decided != nil
	}, 20*time.Second, tick, "the node is decided on once consolidateAfter has passed: the decider woke at that deadline")
	assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_EMPTY, decided.GetReason())
	assert.False(t, decided.GetRequestTime().AsTime().Before(marked.Add(3*time.Second)), "not before its 3 s were up")
}
