package main

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

// Disruption budgets hold back emptiness, as Karpenter v1's hold back its voluntary
// disruptions: per pass and per pool, only as many empty nodes are terminated as the pool's
// budgets for reason Empty allow, the nodes already disrupting taken off. Expiry, interruption,
// registration timeouts and deletions are forceful and not budgeted (but the nodes they
// disrupt count against the budgets).
//
// What is disrupting comes from the cluster (disruption.Disrupting), and, for the moments
// between publishing an intent and the executor tainting its node, from what this replica
// published (decider.pending). Replicas agree on which empty nodes go, as they choose them in
// the same order (oldest emptiness timestamp, then name) and intent ids are deterministic.

// poolBudget is what one pool's budgets are judged against in a pass.
type poolBudget struct {
	Budgets    []karpv1.Budget // nil (a v1alpha5 Provisioner): unlimited
	Total      int             // the pool's nodes as Karpenter counts them: initialized claims not terminating their instance
	Disrupting int             // of them, those being disrupted, this replica's pending intents included
	claims     map[string]bool // claim UID → disrupting, for the claims counted in Total
}

// budgets reads every pool's budgets and counts its nodes, and those disrupting, from the cache.
func (k *kube) budgets() map[string]*poolBudget {
	out := map[string]*poolBudget{}
	for _, p := range k.cache.Pools() {
		b := &poolBudget{claims: map[string]bool{}}
		if !p.Legacy {
			b.Budgets = p.Spec.Disruption.Budgets
		}
		out[p.Name] = b
	}
	for _, nc := range k.cache.Claims() {
		b := out[poolOf(nc.Labels)]
		if b == nil || !nc.IsTrue(karpv1.ConditionTypeInitialized) || nc.IsTrue(karpv1.ConditionTypeInstanceTerminating) {
			continue
		}
		var node *corev1.Node
		if nc.Status.NodeName != "" {
			if n, ok := k.cache.Node(nc.Status.NodeName); ok {
				node = n
			}
		}
		d := disruption.Disrupting(nc, node)
		b.Total++
		if d {
			b.Disrupting++
		}
		b.claims[string(nc.UID)] = d
	}
	return out
}

// pendingIntent is an intent this replica published whose claim the cluster does not show as
// disrupting yet.
type pendingIntent struct {
	Pool  string
	Empty bool      // an emptiness decision, which the executor abandons if the node is no longer empty
	At    time.Time // first published
}

// settle counts this replica's pending intents against their pools' budgets, and forgets
// those whose claim is disrupting (the cluster counts it now), gone, no longer a candidate for
// the decision, or not taken up within resumeAfter (the intent is presumed lost). It marks the
// candidates already counted as disrupting, which do not use the budget again.
func settle(pending map[string]pendingIntent, cands []candidate, pools map[string]*poolBudget, now time.Time, resumeAfter time.Duration) {
	byUID := map[string]*candidate{}
	for i := range cands {
		c := &cands[i]
		byUID[c.UID] = c
		if b := pools[c.Pool]; b != nil && b.claims[c.UID] {
			c.Counted = true
		}
	}
	for uid, p := range pending {
		b, c := pools[p.Pool], byUID[uid]
		disrupting, counted := false, false
		if b != nil {
			disrupting, counted = b.claims[uid]
		}
		gone := !counted || disrupting || now.Sub(p.At) > resumeAfter
		if p.Empty && (c == nil || !c.Empty || c.BlockedBy != "") {
			gone = true
		}
		if gone {
			delete(pending, uid)
			continue
		}
		b.Disrupting++
		if c != nil {
			c.Counted = true
		}
	}
}

// withinBudgets keeps, in each pool, only as many emptiness terminations as the pool's budgets
// for reason Empty allow, oldest emptiness first (then by name); the others are blocked, and
// say which budget holds them. The pass's other terminations (expiry) count as disrupting.
func withinBudgets(acts []action, pools map[string]*poolBudget, now time.Time) []action {
	empties := map[string][]int{} // pool → indexes of its emptiness terminations
	forced := map[string]int{}    // pool → its other terminations of counted nodes in this pass
	for i, a := range acts {
		if a.Kind != terminate || a.Candidate.Counted {
			continue
		}
		switch {
		case a.Intent.GetReason() == commonv1.TerminationReason_TERMINATION_REASON_EMPTY:
			empties[a.Candidate.Pool] = append(empties[a.Candidate.Pool], i)
		case a.Candidate.Initialized:
			forced[a.Candidate.Pool]++
		}
	}
	for pool, idx := range empties {
		b := pools[pool]
		if b == nil {
			continue // a pool not (or no longer) known: no budgets
		}
		slices.SortFunc(idx, func(x, y int) int {
			cx, cy := acts[x].Candidate, acts[y].Candidate
			if c := cx.EmptySince.Compare(cy.EmptySince); c != 0 {
				return c
			}
			return strings.Compare(cx.Name, cy.Name)
		})
		disrupting := b.Disrupting + forced[pool]
		allow := disruption.Allowed(b.Budgets, karpv1.DisruptionReasonEmpty, now, b.Total, disrupting)
		if allow.Nodes >= len(idx) {
			continue
		}
		why := disruption.Allowed(b.Budgets, karpv1.DisruptionReasonEmpty, now, b.Total, disrupting+allow.Nodes).Why
		for _, i := range idx[allow.Nodes:] {
			acts[i] = action{Kind: blocked, Candidate: acts[i].Candidate, Why: "empty node not terminated: " + why}
		}
	}
	return acts
}
