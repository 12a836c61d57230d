package disruption

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// Counted reports whether a node counts towards its pool's size for disruption budgets,
// Karpenter's rule: its claim is initialized and its instance is not terminating yet. A node
// launched but not initialized takes no pods and is not counted, so a percentage budget does
// not grow with replacements that are not ready.
func Counted(v clusterstate.NodeView) bool {
	return v.Claim.IsTrue(karpv1.ConditionTypeInitialized) && !v.Claim.IsTrue(karpv1.ConditionTypeInstanceTerminating)
}

// Disrupting reports whether a node is being disrupted, or is as good as gone for budgets: its
// claim or node is being deleted, a decision to remove it is recorded (DecisionAnnotation), it
// carries the karpenter.sh/disrupted taint, or its node is not Ready.
func Disrupting(v clusterstate.NodeView) bool {
	if Marked(v.Claim, v.Node) {
		return true
	}
	if v.Node == nil {
		return false
	}
	for _, c := range v.Node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return true
}

// Marked reports whether the claim or its node is marked for removal: being deleted, a decision
// recorded on the claim, or the node tainted karpenter.sh/disrupted. A nil claim or node says
// nothing.
func Marked(nc *karpv1.NodeClaim, node *corev1.Node) bool {
	if nc != nil && (nc.DeletionTimestamp != nil || nc.Annotations[DecisionAnnotation] != "") {
		return true
	}
	if node == nil {
		return false
	}
	if node.DeletionTimestamp != nil {
		return true
	}
	for _, t := range node.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return true
		}
	}
	return false
}

// Ledger is the one count of every pool's nodes and of those disrupting, against which every
// voluntary disruption is allowed, whatever its reason: Karpenter's rule (Counted, Disrupting).
// A decision made in a pass is taken off at once (Take), so two methods of one pass, or two
// nodes of one method, never spend the same room.
type Ledger struct {
	now   time.Time
	pools map[string]*poolCount
}

type poolCount struct {
	budgets           []karpv1.Budget
	unlimited         bool // a v1alpha5 Provisioner: no budgets
	total, disrupting int
}

// NewLedger counts the views against their pools at now.
func NewLedger(views []clusterstate.NodeView, pools []clusterstate.Pool, now time.Time) *Ledger {
	l := &Ledger{now: now, pools: map[string]*poolCount{}}
	for _, p := range pools {
		l.pools[p.Name] = &poolCount{budgets: p.Spec.Disruption.Budgets, unlimited: p.Legacy}
	}
	for _, v := range views {
		p := l.pools[v.PoolName()]
		if p == nil || !Counted(v) {
			continue
		}
		p.total++
		if Disrupting(v) {
			p.disrupting++
		}
	}
	return l
}

// Allowed is how many more of the pool's nodes may be disrupted for the reason now, and which
// budget says so. A pool the ledger does not know (gone) allows none.
func (l *Ledger) Allowed(pool string, reason karpv1.DisruptionReason) Allowance {
	p := l.pools[pool]
	switch {
	case p == nil:
		return Allowance{Why: "nodepool " + pool + " is gone"}
	case p.unlimited:
		return Allowance{Nodes: Unlimited}
	}
	return Allowed(p.budgets, reason, l.now, p.total, p.disrupting)
}

// Take counts n more of the pool's nodes as disrupting: a decision this pass made.
func (l *Ledger) Take(pool string, n int) {
	if p := l.pools[pool]; p != nil {
		p.disrupting += n
	}
}

// Counts are the pool's counted nodes and those of them disrupting (decisions taken included).
func (l *Ledger) Counts(pool string) (total, disrupting int) {
	if p := l.pools[pool]; p != nil {
		return p.total, p.disrupting
	}
	return 0, 0
}

// Pools names the pools the ledger counts.
func (l *Ledger) Pools() []string {
	out := make([]string, 0, len(l.pools))
	for name := range l.pools {
		out = append(out, name)
	}
	return out
}

// Budget is what the pool's budgets allow for the reason now before the nodes disrupting are
// taken off, and those nodes (decisions taken included): Karpenter's
// karpenter_nodepools_allowed_disruptions and karpenter_nodepools_nodes_consuming_budgets. A
// pool without budgets (a v1alpha5 Provisioner) allows all its nodes.
func (l *Ledger) Budget(pool string, reason karpv1.DisruptionReason) (allowed, disrupting int) {
	p := l.pools[pool]
	switch {
	case p == nil:
		return 0, 0
	case p.unlimited:
		return p.total, p.disrupting
	}
	return Allowed(p.budgets, reason, l.now, p.total, 0).Nodes, p.disrupting
}
