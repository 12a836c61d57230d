package disruption

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

var reasons = []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonDrifted}

// randomCluster makes pools with random budgets (counts, percentages, reasons, schedules) and
// nodes in them in random states: initialized or not, ready or not, tainted, decided, deleting.
func randomCluster(r *rand.Rand, now time.Time) ([]clusterstate.Pool, []clusterstate.NodeView) {
	var pools []clusterstate.Pool
	var views []clusterstate.NodeView
	for p := range 1 + r.IntN(3) {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pool-%d", p)}}
		for range r.IntN(3) {
			b := karpv1.Budget{Nodes: []string{"0", "1", "2", "10%", "50%", "100%"}[r.IntN(6)]}
			if r.IntN(2) == 0 {
				b.Reasons = []karpv1.DisruptionReason{reasons[r.IntN(len(reasons))]}
			}
			if r.IntN(4) == 0 {
				sched := []string{"* * * * *", "0 0 1 1 *"}[r.IntN(2)]
				b.Schedule, b.Duration = &sched, &metav1.Duration{Duration: time.Hour}
			}
			np.Spec.Disruption.Budgets = append(np.Spec.Disruption.Budgets, b)
		}
		pools = append(pools, clusterstate.Pool{NodePool: np, Legacy: r.IntN(8) == 0})
		for n := range r.IntN(12) {
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", np.Name, n),
				Labels: map[string]string{karpv1.NodePoolLabelKey: np.Name}, Annotations: map[string]string{}}}
			if r.IntN(5) > 0 {
				nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue})
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Name},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
			switch r.IntN(8) {
			case 0:
				node.Status.Conditions[0].Status = corev1.ConditionFalse
			case 1:
				node.Spec.Taints = []corev1.Taint{karpv1.DisruptedNoScheduleTaint}
			case 2:
				nc.Annotations[DecisionAnnotation] = Decision{Reason: karpv1.DisruptionReasonEmpty}.Value()
			case 3:
				nc.DeletionTimestamp = &metav1.Time{Time: now}
			}
			views = append(views, clusterstate.NodeView{Claim: nc, Node: node})
		}
	}
	return pools, views
}

// limit is the most nodes of a pool the budgets allow disrupting for a reason at now, counted
// independently of the ledger: the least of the active budgets that apply, MaxInt without one.
func limit(p clusterstate.Pool, reason karpv1.DisruptionReason, total int, now time.Time) int {
	if p.Legacy {
		return Unlimited
	}
	out := Unlimited
	for _, b := range p.Spec.Disruption.Budgets {
		if len(b.Reasons) > 0 && b.Reasons[0] != reason {
			continue
		}
		if active, err := Active(b, now); err != nil || !active {
			continue
		}
		n, err := Nodes(b.Nodes, total)
		if err == nil {
			out = min(out, n)
		}
	}
	return out
}

// Whatever the cluster, budgets and reasons, a decider that takes from the ledger only what it
// allows never has more of a pool's nodes disrupting than any budget for the reason allows (the
// nodes disrupting before it started aside: it only adds while there is room).
func TestLedgerNeverExceedsABudget(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 30, 0, time.UTC)
	for seed := range uint64(500) {
		r := rand.New(rand.NewPCG(seed, 7))
		pools, views := randomCluster(r, now)
		l := NewLedger(views, pools, now)
		start := map[string]int{}
		for _, p := range pools {
			_, start[p.Name] = l.Counts(p.Name)
		}
		for range 20 {
			p := pools[r.IntN(len(pools))]
			reason := reasons[r.IntN(len(reasons))]
			a := l.Allowed(p.Name, reason)
			want := r.IntN(4)
			take := min(want, a.Nodes)
			l.Take(p.Name, take)
			total, disrupting := l.Counts(p.Name)
			if take > 0 && disrupting > max(limit(p, reason, total, now), start[p.Name]) {
				t.Fatalf("seed %d: pool %s, reason %s: %d disrupting after taking %d, budgets allow %d (total %d)",
					seed, p.Name, reason, disrupting, take, limit(p, reason, total, now), total)
			}
			if a.Nodes == 0 && a.Why == "" && !p.Legacy && total > 0 {
				t.Fatalf("seed %d: pool %s refuses %s without saying why", seed, p.Name, reason)
			}
		}
	}
}

// Whatever happens to a decision's replacements and however often it is looked at, following
// Decision.Next taints every node before any replacement exists, deletes no claim before every
// replacement is initialized, never abandons once a claim is deleted, and ends (done or
// abandoned).
func TestDecisionStepsKeepKarpentersOrder(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	timeout := 10 * time.Minute
	for seed := range uint64(1000) {
		r := rand.New(rand.NewPCG(seed, 11))
		d := Decision{DecidedAt: t0}
		for i := range 1 + r.IntN(3) {
			d.Claims = append(d.Claims, fmt.Sprintf("old-%d", i))
		}
		for i := range r.IntN(3) {
			d.Replacements = append(d.Replacements, fmt.Sprintf("new-%d", i))
		}
		tainted, deleting := map[string]bool{}, map[string]bool{}
		reps := map[string]Replacement{}
		now := t0
		ended := false
		for step := 0; step < 200 && !ended; step++ {
			now = now.Add(time.Duration(r.IntN(40)) * time.Second)
			// The world moves: replacements initialize, fail or go; someone deletes a claim.
			for name, rep := range reps {
				switch r.IntN(20) {
				case 0:
					rep.Initialized = true
				case 1:
					rep.LaunchFailed = "ICE"
				case 2:
					rep.Exists = false
				}
				reps[name] = rep
			}
			if r.IntN(50) == 0 {
				deleting[d.Claims[r.IntN(len(d.Claims))]] = true
			}
			o := Observed{Now: now, Replacements: map[string]Replacement{}}
			for _, c := range d.Claims {
				switch {
				case deleting[c]:
					o.Deleting = append(o.Deleting, c)
				case !tainted[c]:
					o.Untainted = append(o.Untainted, c)
				}
			}
			for name, rep := range reps {
				o.Replacements[name] = rep
			}
			move, why := d.Next(o, timeout)
			switch move {
			case MoveTaint:
				for _, c := range o.Untainted {
					tainted[c] = true
				}
			case MoveLaunch:
				for _, c := range d.Claims {
					if !tainted[c] && !deleting[c] {
						t.Fatalf("seed %d: launching replacements while %s is not tainted", seed, c)
					}
				}
				for _, name := range d.Replacements {
					reps[name] = Replacement{Exists: true}
				}
				d = d.With(StepLaunched, now, "")
			case MoveDelete:
				if len(o.Deleting) == 0 {
					for _, name := range d.Replacements {
						if rep := reps[name]; !rep.Exists || !rep.Initialized || rep.LaunchFailed != "" {
							t.Fatalf("seed %d: deleting the claims before replacement %s is initialized (%+v)", seed, name, rep)
						}
					}
				}
				for _, c := range d.Claims {
					deleting[c] = true
				}
			case MoveAbandon:
				if len(o.Deleting) > 0 {
					t.Fatalf("seed %d: abandoning (%s) after a claim was deleted", seed, why)
				}
				ended = true
			case MoveDone:
				ended = true
			case MoveWait:
			default:
				t.Fatalf("seed %d: unknown move %d", seed, move)
			}
		}
		if !ended {
			t.Fatalf("seed %d: the decision neither ended nor was abandoned within its timeout (now %s)", seed, now.Sub(t0))
		}
	}
}
