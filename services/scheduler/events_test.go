package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 30: a scale-out does not make an API call per pod for its Nominated events. Pods are
// told where they go within a budget of per-pod events (here 3, not refilled within the test);
// the claim is told how many pods were nominated to it and how many got no event of their own.
func TestNominatedEventsStayWithinTheirBudget(t *testing.T) {
	e := newEnv(t, "sched-nominated-events", v1Example)
	e.start("nominated-events", "--nominated-event-burst", "3", "--nominated-event-qps", "0.0001")
	pods := e.pendingPods("many", 6, "100m")
	e.schedule("events-1", pods)
	nc := e.onlyClaim("one node fits the six pods")
	e.assertNominatedTo(pods, nc.Name, "every pod is nominated, told or not")

	require.Eventually(t, func() bool {
		for _, m := range e.claimEvents(nc.Name, reasonNominated) {
			if strings.Contains(m, "Nominated 6 pod(s) to this NodeClaim; 3 of them were not told so in an event of their own") {
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "the claim counts the pods left untold")
	// Events are recorded in order: the claim's came after the pods'.
	told := 0
	for _, p := range pods {
		msgs := e.podEvents(p, reasonNominated)
		assert.LessOrEqual(t, len(msgs), 1, "pod %s is told once", p.Name)
		if len(msgs) == 1 {
			assert.Contains(t, msgs[0], "Pod should schedule on: nodeclaim/"+nc.Name)
			told++
		}
	}
	assert.Equal(t, 3, told, "the budget's pods are told, the others are not")
}

// claimEvents returns the messages of the NodeClaim's events with the reason.
func (e *env) claimEvents(claim, reason string) []string {
	list, err := e.kube.CoreV1().Events("").List(e.ctx, metav1.ListOptions{
		FieldSelector: fmt.Sprintf("involvedObject.kind=NodeClaim,involvedObject.name=%s,reason=%s", claim, reason)})
	require.NoError(e.t, err)
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Message)
	}
	return out
}
