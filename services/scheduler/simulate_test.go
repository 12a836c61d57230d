package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/subject"
	schedulerv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/scheduler/v1"
)

// simulatedPods projects n pods that exist nowhere but in the request.
func simulatedPods(n int, cpu string, mutate ...func(*corev1.Pod)) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "sim", Name: fmt.Sprintf("web-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
		for _, m := range mutate {
			m(p)
		}
		out = append(out, p)
	}
	return out
}

// simulateRequest asks the schedulers, as the CLI does, and decodes the reply.
func (e *env) simulate(req *schedulerv1.SimulateRequest) (*schedulerv1.SimulateResponse, string) {
	e.t.Helper()
	data, err := proto.Marshal(req)
	require.NoError(e.t, err)
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	reply, err := e.conn.NATS().RequestMsgWithContext(ctx, &nats.Msg{Subject: e.conn.Prefix().Of(subject.SchedulerSimulate), Data: data})
	require.NoError(e.t, err)
	if msg := reply.Header.Get(bus.HeaderError); msg != "" {
		return nil, msg
	}
	resp := &schedulerv1.SimulateResponse{}
	require.NoError(e.t, proto.Unmarshal(reply.Data, resp))
	return resp, ""
}

func projections(pods []*corev1.Pod) *schedulerv1.SimulateRequest {
	req := &schedulerv1.SimulateRequest{}
	for _, p := range pods {
		req.Pods = append(req.Pods, podproj.Project(p, nil))
	}
	return req
}

// A workload is answered with the plan a batch would get (pool, cheapest type first, price)
// and nothing is created: no NodeClaim, no launch intent. Pods no pool takes are explained, a
// bad request is refused in the Fw-Error header, and a replica that does not lead answers too.
func TestSimulateAnswersWithoutCreating(t *testing.T) {
	e := newEnv(t, "sched-simulate", v1Example)
	e.start("sim-a")

	resp, errMsg := e.simulate(projections(simulatedPods(5, "300m")))
	require.Empty(t, errMsg)
	require.Len(t, resp.GetNodeClaims(), 1, "one node fits all five pods")
	c := resp.GetNodeClaims()[0]
	assert.Equal(t, "default", c.GetNodePoolName())
	require.NotEmpty(t, c.GetInstanceTypes())
	assert.Equal(t, "t4g.medium", c.GetInstanceTypes()[0].GetName(), "the cheapest t4g that fits 1500m, first")
	assert.Len(t, c.GetPods(), 5)
	assert.Equal(t, "sim/web-0", c.GetPods()[0].GetNamespace()+"/"+c.GetPods()[0].GetName())
	assert.Greater(t, c.GetPriceUsdPerHour(), 0.0)
	assert.InDelta(t, c.GetInstanceTypes()[0].GetOfferings()[0].GetPriceUsdPerHour(), c.GetPriceUsdPerHour(), 1e-9, "the claim costs its cheapest offering")
	assert.InDelta(t, c.GetPriceUsdPerHour(), resp.GetPriceUsdPerHour(), 1e-9)
	assert.Equal(t, "sim-a", resp.GetAnsweredBy())
	assert.Equal(t, int64(1500), c.GetRequests().GetQuantities()["cpu"])

	// A pod the pool's architecture excludes is explained, per pool.
	amd := simulatedPods(1, "100m", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "amd64"} })
	resp, errMsg = e.simulate(projections(amd))
	require.Empty(t, errMsg)
	assert.Empty(t, resp.GetNodeClaims())
	require.Len(t, resp.GetUnschedulable(), 1)
	assert.Contains(t, resp.GetUnschedulable()[0].GetReason(), "default")

	_, errMsg = e.simulate(&schedulerv1.SimulateRequest{})
	assert.Contains(t, errMsg, "names no pod")
	dup := projections(simulatedPods(2, "100m"))
	dup.Pods[1].Uid = dup.Pods[0].Uid
	_, errMsg = e.simulate(dup)
	assert.Contains(t, errMsg, "given to two pods")

	// A standby replica answers as well (the queue group spreads requests over both).
	sctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() {
		done <- run(sctx, []string{"--nats-url", e.natsURL, "--kubeconfig", e.c.Kubeconfig, "--admin-addr", "127.0.0.1:0",
			"--identity", "sim-b", "--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "500ms"})
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool {
		resp, errMsg := e.simulate(projections(simulatedPods(1, "100m")))
		return errMsg == "" && resp.GetAnsweredBy() == "sim-b"
	}, time.Minute, 20*time.Millisecond, "the standby replica sim-b answers")
	assert.NotContains(t, e.logs.String(), `"batch":"takeover-sim-b-`, "sim-b does not lead")

	assert.Empty(t, e.nodeClaims(), "simulate creates no NodeClaim")
	assert.Zero(t, e.launchIntentCount(), "simulate publishes no launch intent")
}
