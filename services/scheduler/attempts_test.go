package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// A claim's node takes pods once it is Ready, not cordoned, and rid of the claim's startup
// taints and of every lifecycle taint; a taint of its pool's does not stop it.
func TestTakesPods(t *testing.T) {
	nc := &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{StartupTaints: []corev1.Taint{{Key: "agent/not-ready", Effect: corev1.TaintEffectNoSchedule}}}}
	node := func(ready corev1.ConditionStatus, cordoned bool, taints ...string) *corev1.Node {
		n := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: cordoned}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
		for _, k := range taints {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
		}
		return n
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"ready", node(corev1.ConditionTrue, false), true},
		{"ready, a pool's taint", node(corev1.ConditionTrue, false, "dedicated"), true},
		{"not ready", node(corev1.ConditionFalse, false), false},
		{"no Ready condition yet", &corev1.Node{}, false},
		{"cordoned", node(corev1.ConditionTrue, true), false},
		{"its startup taint", node(corev1.ConditionTrue, false, "agent/not-ready"), false},
		{"unregistered", node(corev1.ConditionTrue, false, karpv1.UnregisteredTaintKey), false},
		{"cloud provider uninitialized", node(corev1.ConditionTrue, false, "node.cloudprovider.kubernetes.io/uninitialized"), false},
		{"tainted not-ready", node(corev1.ConditionTrue, false, corev1.TaintNodeNotReady), false},
	} {
		assert.Equal(t, tc.want, takesPods(nc, tc.node), tc.name)
	}
}

// A refusal counts when kube-scheduler rewrote the pod's Unschedulable condition after the node
// last changed in what it filters on and after the given time; a pod listed at start, a rewrite
// that repeats the verdict, and a change of the node since do not count.
func TestRefusedSince(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	kicks := 0
	a := newKubeAttempts(func() time.Time { return now }, func() { kicks++ })
	pods, nodes := a.podHandler(), a.nodeHandler()
	tainted := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "agent/not-ready", Effect: corev1.TaintEffectNoSchedule}}}}
	untainted := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	pod := func(msg string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}}}
	}

	nodes.OnAdd(tainted, true)
	pods.OnAdd(pod("0/1 nodes: untolerated taint"), true)
	assert.False(t, a.refusedSince("p", "n", time.Time{}), "listed at start: when it was judged is unknown")

	now = now.Add(time.Second)
	pods.OnUpdate(pod("0/1 nodes: untolerated taint"), pod("0/1 nodes: untolerated taint, again"))
	assert.True(t, a.refusedSince("p", "n", time.Time{}), "rewritten after the node last changed")
	assert.False(t, a.refusedSince("p", "n", now), "not after the time asked")

	now = now.Add(time.Second)
	nodes.OnUpdate(tainted, untainted)
	assert.False(t, a.refusedSince("p", "n", time.Time{}), "the node changed since: the refusal may have judged it as it was")

	now = now.Add(time.Second)
	pods.OnUpdate(pod("0/1 nodes: untolerated taint, again"), pod("0/1 nodes: untolerated taint, again"))
	assert.False(t, a.refusedSince("p", "n", time.Time{}), "the same verdict is not a new attempt")
	pods.OnUpdate(pod("0/1 nodes: untolerated taint, again"), pod("0/1 nodes: anti-affinity"))
	assert.True(t, a.refusedSince("p", "n", time.Time{}), "refused with the node as it is")
	assert.Positive(t, kicks, "the nomination check is nudged")

	bound := pod("0/1 nodes: anti-affinity")
	bound.Spec.NodeName = "elsewhere"
	pods.OnUpdate(pod("0/1 nodes: anti-affinity"), bound)
	assert.False(t, a.refusedSince("p", "n", time.Time{}), "forgotten once the pod is placed")

	pods.OnUpdate(pod("0/1 nodes: untolerated taint"), pod("0/1 nodes: anti-affinity"))
	pods.OnDelete(pod(""))
	assert.False(t, a.refusedSince("p", "n", time.Time{}), "forgotten with the pod")
}
