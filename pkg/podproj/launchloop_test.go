package podproj

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// launched is a claim made at t0+at, launched for the workloads with their prior failures; its
// node did not hold the pods of misfitFor, for the reason misfit.
func launched(name string, at time.Duration, misfit string, prior map[string]int, misfitFor ...string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(at)),
		Annotations: map[string]string{LaunchedForAnnotation: LaunchedFor(prior)}}}
	if misfit != "" {
		nc.Annotations[MisfitAnnotation] = Misfit{Why: misfit, Workloads: misfitFor}.Value()
	}
	return nc
}

func replicaPod(name, rs string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: rs, UID: types.UID("rs-uid-" + rs), Controller: ptr.To(true)}}}}
}

func TestWorkloadOf(t *testing.T) {
	assert.Equal(t, "rs-uid-app", WorkloadOf(replicaPod("a", "app")), "a controller's pods are one workload")
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	assert.Equal(t, "u1", WorkloadOf(bare), "a pod without a controller is its own")
}

// Each claim carries the count before it; its misfit adds one. The latest claim of a workload
// tells whether it failed, and the history survives the earlier claims going away.
func TestLaunchHistories(t *testing.T) {
	claims := []*karpv1.NodeClaim{
		launched("a", 0, "short", map[string]int{"w": 0}, "w"),
		launched("b", 10*time.Second, "short", map[string]int{"w": 1, "other": 0}, "w"),
		launched("c", 20*time.Second, "", map[string]int{"w": 2}),
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "garbled", Annotations: map[string]string{LaunchedForAnnotation: "{"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "garbled-misfit", Annotations: map[string]string{LaunchedForAnnotation: `{"x":0}`, MisfitAnnotation: "short"}}},
	}
	h := LaunchHistories(claims)
	assert.Equal(t, LaunchHistory{Failed: 2, Latest: "c", LatestAt: t0.Add(20 * time.Second)}, h["w"])
	assert.Equal(t, LaunchHistory{Failed: 0, Latest: "b", LatestAt: t0.Add(10 * time.Second)}, h["other"],
		"other was planned on b beside w and landed: b's misfit is w's, not other's")
	// b and a gone: c alone carries w's two failures.
	assert.Equal(t, 2, LaunchHistories(claims[2:3])["w"].Failed)
	assert.Equal(t, 0, h["x"].Failed, "a misfit record no scheduler wrote counts nothing")
	assert.Len(t, h, 3)
}

func TestLaunchLoopHeld(t *testing.T) {
	r := LaunchLoopRule{MaxFailed: 3, Hold: 10 * time.Minute}
	under := LaunchHistory{Failed: 2, Latest: "b", LatestAt: t0, LatestMisfit: "short"}
	held, _ := r.Held(under, t0.Add(time.Second))
	assert.False(t, held, "two failures of three allowed")

	tripped := LaunchHistory{Failed: 3, Latest: "c", LatestAt: t0, LatestMisfit: "short"}
	held, until := r.Held(tripped, t0.Add(time.Minute))
	assert.True(t, held)
	assert.Equal(t, t0.Add(10*time.Minute), until)
	held, _ = r.Held(tripped, t0.Add(10*time.Minute))
	assert.False(t, held, "after the hold one more launch is tried")
}

// The latest node launched for a workload that did not hold its pending pod stays; one that did
// hold (no misfit), or a workload with no pending pod, keeps nothing.
func TestLaunchLoopKeeps(t *testing.T) {
	r := LaunchLoopRule{MaxFailed: 3, Hold: 10 * time.Minute}
	p := replicaPod("web-1", "web")
	w := WorkloadOf(p)
	h := map[string]LaunchHistory{
		w:            {Failed: 1, Latest: "web-claim", LatestAt: t0, LatestMisfit: "its node registered less"},
		"other":      {Failed: 1, Latest: "other-claim", LatestAt: t0, LatestMisfit: "short"},
		"rs-uid-api": {Failed: 1, Latest: "api-claim", LatestAt: t0},
	}
	kept := r.Keeps(h, []*corev1.Pod{p, replicaPod("api-1", "api")})
	assert.Equal(t, map[string]string{"web-claim": "pod default/web-1 it was launched for is still pending (its node registered less)"}, kept)
	assert.Empty(t, r.Keeps(h, nil))
}
