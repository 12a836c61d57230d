package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

// emptyNodes are n empty nodes of pool "default" past their TTL, named default-a, default-b,
// ... and empty since t0, t0+1s, ... (so default-a has been empty longest).
func emptyNodes(n int, opts ...func(*candidate)) []candidate {
	var out []candidate
	for i := range n {
		l := string(rune('a' + i))
		out = append(out, node(emptySince(t0.Add(time.Duration(i)*time.Second)), func(c *candidate) {
			c.Name, c.UID, c.NodeName, c.InstanceID = "default-"+l, "uid-"+l, "ip-"+l, "i-"+l
		}))
		for _, o := range opts {
			o(&out[i])
		}
	}
	return out
}

func pool(total, disrupting int, budgets ...karpv1.Budget) map[string]*poolBudget {
	return map[string]*poolBudget{"default": {Budgets: budgets, Total: total, Disrupting: disrupting, claims: map[string]bool{}}}
}

// terminated names the claims decide terminates, and blocked maps those it holds back to why.
func outcome(acts []action) (terminated []string, blockedWhy map[string]string) {
	blockedWhy = map[string]string{}
	for _, a := range acts {
		switch a.Kind {
		case terminate:
			terminated = append(terminated, a.Candidate.Name)
		case blocked:
			blockedWhy[a.Candidate.Name] = a.Why
		}
	}
	return terminated, blockedWhy
}

func TestDecideWithinBudgets(t *testing.T) {
	later := t0.Add(time.Hour)
	sched := func(n, s string, d time.Duration) karpv1.Budget {
		return karpv1.Budget{Nodes: n, Schedule: &s, Duration: &metav1.Duration{Duration: d}}
	}
	cases := []struct {
		name    string
		cands   []candidate
		pools   map[string]*poolBudget
		want    []string // terminated, in order
		blocked int
		why     string // of every blocked one
	}{
		{"no pool known: no budgets", emptyNodes(3), nil, []string{"default-a", "default-b", "default-c"}, 0, ""},
		{"no budgets (a Provisioner): unlimited", emptyNodes(5), pool(5, 0), []string{"default-a", "default-b", "default-c", "default-d", "default-e"}, 0, ""},
		{"the default 10% of 5: one, the longest empty", emptyNodes(5), pool(5, 0, karpv1.Budget{Nodes: "10%"}), []string{"default-a"}, 4,
			`empty node not terminated: budget 0 (nodes "10%") allows 1 of 5 nodes (Empty) and 1 is already disrupting`},
		{"10% of 11 with 3 empty: two", emptyNodes(3), pool(11, 0, karpv1.Budget{Nodes: "10%"}), []string{"default-a", "default-b"}, 1, ""},
		{"nodes 1 with one disrupting: none", emptyNodes(3), pool(5, 1, karpv1.Budget{Nodes: "1"}), nil, 3,
			`empty node not terminated: budget 0 (nodes "1") allows 1 of 5 nodes (Empty) and 1 is already disrupting`},
		{"nodes 2 with one disrupting: one", emptyNodes(3), pool(5, 1, karpv1.Budget{Nodes: "2"}), []string{"default-a"}, 2, ""},
		{"most restrictive of several", emptyNodes(4), pool(4, 0, karpv1.Budget{Nodes: "100%"}, karpv1.Budget{Nodes: "2"}), []string{"default-a", "default-b"}, 2,
			`budget 1 (nodes "2") allows 2 of 4 nodes (Empty) and 2 are already disrupting`},
		{"schedule active now: none", emptyNodes(2), pool(2, 0, sched("0", "0 12 * * *", 2*time.Hour)), nil, 2,
			`empty node not terminated: budget 0 (nodes "0", schedule "0 12 * * *", duration 2h) allows 0 of 2 nodes (Empty)`},
		{"schedule inactive: unlimited", emptyNodes(2), pool(2, 0, sched("0", "0 15 * * *", 2*time.Hour)), []string{"default-a", "default-b"}, 0, ""},
		{"budget for another reason only", emptyNodes(2), pool(2, 0, karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}),
			[]string{"default-a", "default-b"}, 0, ""},
		{"invalid schedule blocks", emptyNodes(2), pool(2, 0, sched("5", "0 25 * * *", time.Hour)), nil, 2, "is invalid"},
		{"the longest empty goes first, whatever the order given", []candidate{emptyNodes(3)[2], emptyNodes(3)[0], emptyNodes(3)[1]},
			pool(3, 0, karpv1.Budget{Nodes: "1"}), []string{"default-a"}, 2, ""},
		{"same emptiness timestamp: by name", emptyNodes(3, emptySince(t0)), pool(3, 0, karpv1.Budget{Nodes: "1"}), []string{"default-a"}, 2, ""},
		{"a counted (pending) node goes again without using the budget", emptyNodes(3, func(c *candidate) { c.Counted = c.Name == "default-b" }),
			pool(3, 1, karpv1.Budget{Nodes: "1"}), []string{"default-b"}, 2, ""},
		{"an expiry this pass counts as disrupting", append(emptyNodes(2), node(busy, expireAfter(time.Minute), func(c *candidate) { c.Name, c.UID = "default-x", "uid-x" })),
			pool(3, 0, karpv1.Budget{Nodes: "1"}), []string{"default-x"}, 2, ""},
		{"expiry is not budgeted", []candidate{node(busy, expireAfter(time.Minute))}, pool(3, 3, karpv1.Budget{Nodes: "0"}), []string{"default-a"}, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, blockedWhy := outcome(decide(tc.cands, tc.pools, later))
			assert.Equal(t, tc.want, got)
			assert.Len(t, blockedWhy, tc.blocked)
			for name, why := range blockedWhy {
				assert.Contains(t, why, tc.why, name)
			}
		})
	}
}

// A pool's budget is used once: the intents a replica published count until the cluster shows
// their claims disrupting, then the cluster's count takes over; an intent whose node is no
// longer empty, or that was never taken up, is forgotten.
func TestSettlePendingIntents(t *testing.T) {
	b1 := karpv1.Budget{Nodes: "1"}
	pools := func(claims map[string]bool) map[string]*poolBudget {
		p := pool(3, 0, b1)
		p["default"].claims = claims
		for _, d := range claims {
			if d {
				p["default"].Disrupting++
			}
		}
		return p
	}
	live := map[string]bool{"uid-a": false, "uid-b": false, "uid-c": false}
	pending := map[string]pendingIntent{}

	// Pass 1: default-a is chosen and published.
	cands := emptyNodes(3)
	ps := pools(live)
	settle(pending, cands, ps, t0.Add(time.Hour), 5*time.Minute)
	got, _ := outcome(decide(cands, ps, t0.Add(time.Hour)))
	require.Equal(t, []string{"default-a"}, got)
	pending["uid-a"] = pendingIntent{Pool: "default", Empty: true, At: t0.Add(time.Hour)}

	// Pass 2: not tainted yet. default-a goes again (same intent), nothing else.
	cands = emptyNodes(3)
	ps = pools(live)
	settle(pending, cands, ps, t0.Add(time.Hour+time.Second), 5*time.Minute)
	assert.Equal(t, 1, ps["default"].Disrupting, "the pending intent counts")
	got, blockedWhy := outcome(decide(cands, ps, t0.Add(time.Hour+time.Second)))
	assert.Equal(t, []string{"default-a"}, got)
	assert.Len(t, blockedWhy, 2)

	// Pass 3: the executor tainted default-a: the cluster counts it, the memory lets go.
	cands = emptyNodes(3, func(c *candidate) { c.Disrupting = c.Name == "default-a" })
	ps = pools(map[string]bool{"uid-a": true, "uid-b": false, "uid-c": false})
	settle(pending, cands, ps, t0.Add(time.Hour+2*time.Second), 5*time.Minute)
	assert.Empty(t, pending)
	assert.Equal(t, 1, ps["default"].Disrupting)
	got, _ = outcome(decide(cands, ps, t0.Add(time.Hour+2*time.Second)))
	assert.Empty(t, got)

	// Pass 4: default-a is gone: default-b goes.
	cands = emptyNodes(3)[1:]
	ps = pools(map[string]bool{"uid-b": false, "uid-c": false})
	settle(pending, cands, ps, t0.Add(time.Hour+3*time.Second), 5*time.Minute)
	got, _ = outcome(decide(cands, ps, t0.Add(time.Hour+3*time.Second)))
	assert.Equal(t, []string{"default-b"}, got)

	// An emptiness intent whose node got a pod is forgotten (the executor abandons it).
	pending = map[string]pendingIntent{"uid-b": {Pool: "default", Empty: true, At: t0}}
	cands = emptyNodes(3, func(c *candidate) { c.Empty = c.Name != "default-b" })
	ps = pools(live)
	settle(pending, cands, ps, t0.Add(time.Second), 5*time.Minute)
	assert.Empty(t, pending)
	assert.Zero(t, ps["default"].Disrupting)

	// An intent never taken up within resumeAfter is forgotten; an expiry intent is kept while
	// its node is busy.
	pending = map[string]pendingIntent{"uid-a": {Pool: "default", Empty: true, At: t0}, "uid-b": {Pool: "default", At: t0}}
	cands = emptyNodes(3, func(c *candidate) { c.Empty = c.Name != "default-b" })
	ps = pools(live)
	settle(pending, cands, ps, t0.Add(6*time.Minute), 5*time.Minute)
	assert.Empty(t, pending)
	pending = map[string]pendingIntent{"uid-b": {Pool: "default", At: t0}}
	settle(pending, cands, ps, t0.Add(time.Minute), 5*time.Minute)
	assert.Len(t, pending, 1)
	assert.Equal(t, 1, ps["default"].Disrupting)
}

// Every blocked node is told the budget; the emptiness intents are those of TestDecide.
func TestBudgetBlockedWhy(t *testing.T) {
	acts := decide(emptyNodes(2), pool(2, 0, karpv1.Budget{Nodes: "0"}), t0.Add(time.Hour))
	require.Len(t, acts, 2)
	for _, a := range acts {
		assert.Equal(t, blocked, a.Kind)
		assert.Nil(t, a.Intent)
		assert.Equal(t, fmt.Sprintf("empty node not terminated: %s allows 0 of 2 nodes (Empty)", `budget 0 (nodes "0")`), a.Why)
	}
	one := decide(emptyNodes(1), pool(2, 0, karpv1.Budget{Nodes: "1"}), t0.Add(time.Hour))
	require.Len(t, one, 1)
	assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_EMPTY, one[0].Intent.GetReason())
}
