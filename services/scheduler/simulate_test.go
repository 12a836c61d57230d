package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/subject"
	schedulerv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/scheduler/v1"
)

// Simulating a node's removal answers where its pods would go: onto another node with room
// (saving the removed node's price), or, with both nodes gone, onto a new claim of the pool.
func TestSimulateRemovingNodes(t *testing.T) {
	e := newEnv(t, "sched-simulate")
	e.apply("deploy/examples/v1/default.yaml")
	a, b := e.node("sim-a"), e.node("sim-b")
	p1, p2 := e.boundPod("web-1", a), e.boundPod("web-2", a)
	e.start("simulate") // its caches are synced before it serves: they hold the nodes and pods

	resp := e.simulate(&schedulerv1.SimulateRequest{NodeNames: []string{a}})
	assert.True(t, resp.GetAllPodsFit())
	assert.Empty(t, resp.GetNewNodeClaims(), "the other node has room")
	require.Len(t, resp.GetPlacements(), 2)
	for _, p := range resp.GetPlacements() {
		assert.Contains(t, []string{p1, p2}, p.GetPod().GetName())
		assert.Equal(t, b, p.GetNodeName())
	}
	price := onDemandPrice(t, "t4g.xlarge")
	assert.InDelta(t, price, resp.GetRemovedCostUsdPerHour(), 1e-9)
	assert.InDelta(t, -price, resp.GetCostDeltaUsdPerHour(), 1e-9, "removing the node saves its price")

	resp = e.simulate(&schedulerv1.SimulateRequest{NodeNames: []string{a, b}})
	assert.True(t, resp.GetAllPodsFit())
	require.NotEmpty(t, resp.GetNewNodeClaims())
	claimed, added := map[string]bool{}, 0.0
	for _, c := range resp.GetNewNodeClaims() {
		assert.Equal(t, "default", c.GetNodePoolName())
		require.NotEmpty(t, c.GetInstanceTypes())
		// Two t4g.medium at spot undercut one t4g.xlarge: each 1-cpu pod gets its own.
		assert.Equal(t, "t4g.medium", c.GetInstanceTypes()[0].GetName())
		added += c.GetInstanceTypes()[0].GetOfferings()[0].GetPriceUsdPerHour()
		for _, p := range c.GetPods() {
			claimed[p.GetName()] = true
		}
	}
	assert.Equal(t, map[string]bool{p1: true, p2: true}, claimed, "both pods go to new claims")
	for _, p := range resp.GetPlacements() {
		assert.NotEmpty(t, p.GetNewNodeClaimName())
	}
	assert.InDelta(t, added, resp.GetAddedCostUsdPerHour(), 1e-9, "each claim at its cheapest option")
	assert.InDelta(t, 2*price, resp.GetRemovedCostUsdPerHour(), 1e-9)
	assert.Greater(t, resp.GetAddedCostUsdPerHour(), 0.0)
	assert.InDelta(t, resp.GetAddedCostUsdPerHour()-2*price, resp.GetCostDeltaUsdPerHour(), 1e-9)
	assert.Empty(t, e.nodeClaims(), "a simulation creates nothing")

	_, err := bus.Request[*schedulerv1.SimulateResponse](e.ctx, e.conn, e.conn.Prefix().Of(subject.SchedulerSimulate),
		&schedulerv1.SimulateRequest{NodeNames: []string{"no-such-node"}})
	var remote *bus.RemoteError
	require.ErrorAs(t, err, &remote)
	assert.Contains(t, remote.Message, `node "no-such-node" not found`)
}

// Two replicas: one holds the Lease and schedules, the other stands by; when the leader stops,
// the standby takes the Lease and schedules the next batch.
func TestStandbyTakesOverTheLease(t *testing.T) {
	e := newEnv(t, "sched-lease")
	e.apply("deploy/examples/v1/default.yaml")
	stopA := e.start("replica-a")
	require.Eventually(t, func() bool { return e.leaseHolder() == "replica-a" }, time.Minute, 50*time.Millisecond)
	e.start("replica-b")
	intents := e.intents()

	pods := e.pendingPods("first", 2, "300m")
	e.publishBatch("lease-1", pods)
	e.nextIntent(intents)
	assert.Equal(t, "replica-a", e.leaseHolder(), "the standby did not take over")

	stopA()
	require.Eventually(t, func() bool { return e.leaseHolder() == "replica-b" }, time.Minute, 50*time.Millisecond,
		"the standby takes the released lease")
	more := e.pendingPods("second", 2, "1") // too big for the first claim's room: a new claim

	e.publishBatch("lease-2", more)
	e.nextIntent(intents)
	assert.Len(t, e.nodeClaims(), 2, "each batch got its claim, from whichever replica led")
}

func (e *env) leaseHolder() string {
	var l *coordinationv1.Lease
	l, err := e.kube.CoordinationV1().Leases("fleetwright").Get(e.ctx, leaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// simulate asks the running scheduler, waiting for it to serve.
func (e *env) simulate(req *schedulerv1.SimulateRequest) *schedulerv1.SimulateResponse {
	var resp *schedulerv1.SimulateResponse
	require.Eventually(e.t, func() bool {
		var err error
		resp, err = bus.Request[*schedulerv1.SimulateResponse](e.ctx, e.conn, e.conn.Prefix().Of(subject.SchedulerSimulate), req)
		if errors.Is(err, nats.ErrNoResponders) {
			return false
		}
		require.NoError(e.t, err)
		return true
	}, time.Minute, 100*time.Millisecond, "the scheduler answers simulate")
	return resp
}

// simTaint keeps other tests' pending pods off the simulation's nodes (the cluster is shared).
var simTaint = corev1.Taint{Key: "fleetwright.io/test", Value: "simulate", Effect: corev1.TaintEffectNoSchedule}

// node registers a t4g.xlarge on-demand node of the default pool in us-east-1a, tainted so
// only this test's pods go there.
func (e *env) node(name string) string {
	n := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{simTaint}}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		scheduling.LabelNodePool: "default", scheduling.LabelInstanceType: "t4g.xlarge", scheduling.LabelZone: "us-east-1a",
		scheduling.LabelCapacityType: "on-demand", scheduling.LabelArch: "arm64", scheduling.LabelOS: "linux",
		scheduling.LabelHostname: name}}}
	_, err := e.kube.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = e.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := e.kube.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		setStatus(n)
		_, err = e.kube.CoreV1().Nodes().UpdateStatus(e.ctx, n, metav1.UpdateOptions{})
		return err
	})
	require.NoError(e.t, err)
	return name
}

func setStatus(n *corev1.Node) {
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("58")}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3920m"), corev1.ResourceMemory: resource.MustParse("15Gi"), corev1.ResourcePods: resource.MustParse("58")}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
}

// boundPod creates a 1-cpu pod already bound to the node.
func (e *env) boundPod(name, node string) string {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Tolerations: []corev1.Toleration{{Key: simTaint.Key, Operator: corev1.TolerationOpEqual,
			Value: simTaint.Value, Effect: simTaint.Effect}}, Containers: []corev1.Container{{Name: "c", Image: "pause",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	_, err := e.kube.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{})
	require.NoError(e.t, err)
	return name
}

func onDemandPrice(t *testing.T, name string) float64 {
	it, ok := catalog.Lookup(name)
	require.True(t, ok)
	return it.OnDemandPriceUSDPerHour
}
