package e2e_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// budgetStack starts a stack with the terminator and the v1 example, its pool emptying nodes
// after 5s under the given budgets (JSON), and n spread pods (one per node) running on n
// initialized nodes.
func budgetStack(t *testing.T, budgets string, n int) *e2e.Stack {
	t.Helper()
	s := e2e.NewStack(t, withTerminator())
	s.Apply("deploy/examples/v1/default.yaml")
	s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p",
		`{"spec":{"disruption":{"consolidationPolicy":"WhenEmpty","consolidateAfter":"5s","budgets":`+budgets+`}}}`)
	deployment(t, s, "spread", n, "500m", "", `      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {matchLabels: {app: spread}}
              topologyKey: kubernetes.io/hostname`)
	podsRunning(t, s, "app=spread", n, 3*time.Minute)
	require.Eventually(t, func() bool {
		claims := s.NodeClaims(t)
		for _, c := range claims {
			if !c.IsTrue(karpv1.ConditionTypeInitialized) {
				return false
			}
		}
		return len(claims) == n
	}, time.Minute, 200*time.Millisecond, "%d NodeClaims, each Initialized", n)
	return s
}

// disruptingNodes names the pool's nodes being disrupted now: tainted karpenter.sh/disrupted,
// or whose NodeClaim is being deleted. A claim counts only if it is deleting both before and
// after the nodes are listed, so the three reads together describe one moment.
func disruptingNodes(t *testing.T, s *e2e.Stack) map[string]bool {
	t.Helper()
	deleting := func() map[string]string { // claim → its node
		out := map[string]string{}
		for _, c := range s.NodeClaims(t) {
			if c.DeletionTimestamp != nil {
				out[c.Name] = c.Status.NodeName
			}
		}
		return out
	}
	before := deleting()
	nodes := launchedNodes(t, s)
	after := deleting()
	out := map[string]bool{}
	for i := range nodes {
		if disrupted(&nodes[i]) {
			out[nodes[i].Name] = true
		}
	}
	for claim, node := range after {
		if _, ok := before[claim]; ok && (node == "" || !out[node]) {
			out["nodeclaim/"+claim] = true
		}
	}
	return out
}

// A budget of one node: inflate-style 5 → 0, and the five empty nodes go one at a time —
// sampled every 200 ms, never more than one of the pool's nodes disrupting — and all go; the
// ones waiting are told which budget holds them.
func TestBudgetOneNodeAtATime(t *testing.T) {
	t.Parallel()
	s := budgetStack(t, `[{"nodes":"1"}]`, 5)
	type victim struct{ node, instance, claim string }
	var victims []victim
	for _, n := range launchedNodes(t, s) {
		c := claimOfNode(t, s, n.Name)
		require.NotNil(t, c, "node %s has a nodeclaim", n.Name)
		victims = append(victims, victim{n.Name, instanceOf(&n), c.Name})
	}
	require.Len(t, victims, 5, "one node per spread pod")

	var mu sync.Mutex
	most, seen, samples := 0, map[string]bool{}, 0
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			d := disruptingNodes(t, s)
			mu.Lock()
			samples++
			most = max(most, len(d))
			for n := range d {
				seen[n] = true
			}
			if len(d) > 1 {
				t.Errorf("%d nodes disrupting at once: %v", len(d), d)
			}
			mu.Unlock()
		}
	}()
	start := time.Now()
	s.Kubectl("scale", "deployment", "spread", "--replicas", "0")
	for _, v := range victims {
		gone(t, s, v.node, v.instance, v.claim, 4*time.Minute)
	}
	close(stop)
	<-done
	t.Logf("5 → 0 under a budget of one node: all gone in %s; %d samples saw %d distinct nodes or claims disrupting", time.Since(start).Round(100*time.Millisecond), samples, len(seen))
	mu.Lock()
	assert.LessOrEqual(t, most, 1, "never more than one node disrupting")
	mu.Unlock()
	// "of 5 nodes", or fewer when the first was gone before the others were found empty.
	assert.Regexp(t, `empty node not removed: budget 0 \(nodes \\"1\\"\) allows 1 of [2-5] nodes \(Empty\) and 1 is already disrupting`,
		s.Service("scheduler").Log(), "the scheduler, which decides disruption, logs that the budget held the others back while one went")
	noLeftovers(t, s)
}

// A budget of no nodes, in a window that is open now (it opens every minute and lasts an hour):
// after consolidateAfter and well past it the empty nodes stay, untainted, and an event on
// their NodeClaims names the budget.
func TestBudgetScheduledZeroBlocks(t *testing.T) {
	t.Parallel()
	s := budgetStack(t, `[{"nodes":"0","schedule":"* * * * *","duration":"1h"}]`, 2)
	claims := s.NodeClaims(t)
	s.Kubectl("scale", "deployment", "spread", "--replicas", "0")

	const budget = `budget 0 (nodes "0", schedule "* * * * *", duration 1h) allows 0 of 2 nodes (Empty)`
	for _, c := range claims {
		require.Eventually(t, func() bool {
			evs, err := s.Kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + c.Name})
			if err != nil {
				return false
			}
			for _, ev := range evs.Items {
				if ev.Reason == "DisruptionBlocked" && strings.Contains(ev.Message, budget) {
					return true
				}
			}
			return false
		}, 2*time.Minute, 250*time.Millisecond, "a DisruptionBlocked event on %s names the budget", c.Name)
	}
	// The decision was made (the events say so, past consolidateAfter); more passes change nothing.
	require.Never(t, func() bool { return len(disruptingNodes(t, s)) > 0 }, 10*time.Second, 200*time.Millisecond,
		"no node disrupted under a budget of no nodes")
	after := s.NodeClaims(t)
	require.Len(t, after, len(claims), "no NodeClaim removed")
	for _, c := range after {
		assert.Nil(t, c.DeletionTimestamp)
		n := getNode(t, s, c.Status.NodeName)
		require.NotNil(t, n, "node %s stays", c.Status.NodeName)
		assert.True(t, c.IsTrue(karpv1.ConditionTypeConsolidatable), "nodeclaim %s was found consolidatable (empty for consolidateAfter)", c.Name)
		assert.False(t, disrupted(n))
	}
	assert.True(t, strings.Contains(s.Service("scheduler").Log(), `empty node not removed: budget 0 (nodes \"0\", schedule \"* * * * *\", duration 1h)`),
		"the scheduler logs the budget that holds the nodes")
}
