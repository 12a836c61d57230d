package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/subject"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

// Issue 31, item 4: the scheduler plans for the pods as the API server has them, not as a batch
// message projects them. A batch that says each pod asks for 10m of CPU, for pods that ask for
// 300m each, gets a claim sized for 5 × 300m, as a true batch would.
func TestBatchIsPlannedForThePodsNotTheMessage(t *testing.T) {
	e := newEnv(t, "sched-trust", v1Example)
	e.start("trust")
	pods := e.pendingPods("inflate", 5, "300m")
	b := &podsv1.PendingPodBatch{BatchId: "batch-lies", WatcherId: "test"}
	for _, p := range pods {
		proj := podproj.Project(p, nil)
		proj.Requests.Quantities[string(corev1.ResourceCPU)] = 10 // millicores: what the message claims
		b.Pods = append(b.Pods, proj)
	}
	require.NoError(t, e.conn.Publish(e.ctx, e.conn.Prefix().Of(subject.PodsPending), b, b.BatchId))
	e.nextIntent()
	nc := e.onlyClaim("one claim for the five pods")
	cpu := nc.Spec.Resources.Requests[corev1.ResourceCPU]
	assert.Equal(t, "1500m", cpu.String(), "sized for the pods' own requests")
}
