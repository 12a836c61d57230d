package disruption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// monday9 is a Monday, 09:30 UTC.
var monday9 = time.Date(2026, 1, 5, 9, 30, 0, 0, time.UTC)

func nodes(n string) karpv1.Budget { return karpv1.Budget{Nodes: n} }

func scheduled(n, schedule string, d time.Duration) karpv1.Budget {
	return karpv1.Budget{Nodes: n, Schedule: &schedule, Duration: &metav1.Duration{Duration: d}}
}

func forReasons(b karpv1.Budget, rs ...karpv1.DisruptionReason) karpv1.Budget {
	b.Reasons = rs
	return b
}

func TestAllowed(t *testing.T) {
	empty, drifted := karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonDrifted
	cases := []struct {
		name              string
		budgets           []karpv1.Budget
		reason            karpv1.DisruptionReason
		now               time.Time
		total, disrupting int
		want              int
		budget            string // the binding budget; "" for none
		why               string // checked when want is 0
	}{
		{name: "no budgets: unlimited", total: 5, want: Unlimited},
		{name: "empty list: unlimited", budgets: []karpv1.Budget{}, total: 5, disrupting: 4, want: Unlimited},
		{name: "10% of 5 rounds up to 1", budgets: []karpv1.Budget{nodes("10%")}, total: 5, want: 1, budget: `budget 0 (nodes "10%")`},
		{name: "10% of 11 rounds up to 2", budgets: []karpv1.Budget{nodes("10%")}, total: 11, want: 2},
		{name: "10% of 10 is 1", budgets: []karpv1.Budget{nodes("10%")}, total: 10, want: 1},
		{name: "0% is 0", budgets: []karpv1.Budget{nodes("0%")}, total: 11, want: 0,
			why: `budget 0 (nodes "0%") allows 0 of 11 nodes (Empty)`},
		{name: "100% is all", budgets: []karpv1.Budget{nodes("100%")}, total: 7, want: 7},
		{name: "10% of no nodes is 0", budgets: []karpv1.Budget{nodes("10%")}, total: 0, want: 0},
		{name: "a count", budgets: []karpv1.Budget{nodes("3")}, total: 100, want: 3},
		{name: "a count above the total", budgets: []karpv1.Budget{nodes("30")}, total: 3, want: 30},
		{name: "disrupting nodes are taken off", budgets: []karpv1.Budget{nodes("3")}, total: 10, disrupting: 2, want: 1},
		{name: "disrupting use the budget up", budgets: []karpv1.Budget{nodes("1")}, total: 5, disrupting: 1, want: 0,
			budget: `budget 0 (nodes "1")`, why: `budget 0 (nodes "1") allows 1 of 5 nodes (Empty) and 1 is already disrupting`},
		{name: "more disrupting than allowed: 0, not negative", budgets: []karpv1.Budget{nodes("1")}, total: 5, disrupting: 3, want: 0,
			why: `budget 0 (nodes "1") allows 1 of 5 nodes (Empty) and 3 are already disrupting`},
		{name: "most restrictive wins", budgets: []karpv1.Budget{nodes("50%"), nodes("2"), nodes("3")}, total: 10, want: 2,
			budget: `budget 1 (nodes "2")`},
		{name: "most restrictive wins, percentage", budgets: []karpv1.Budget{nodes("5"), nodes("10%")}, total: 20, want: 2,
			budget: `budget 1 (nodes "10%")`},
		{name: "schedule active", budgets: []karpv1.Budget{nodes("10"), scheduled("0", "0 9 * * 1-5", 8*time.Hour)}, now: monday9, total: 5, want: 0,
			budget: `budget 1 (nodes "0", schedule "0 9 * * 1-5", duration 8h)`,
			why:    `budget 1 (nodes "0", schedule "0 9 * * 1-5", duration 8h) allows 0 of 5 nodes (Empty)`},
		{name: "schedule fired at now exactly", budgets: []karpv1.Budget{scheduled("0", "30 9 * * *", time.Minute)}, now: monday9, total: 5, want: 0},
		{name: "schedule not yet fired today", budgets: []karpv1.Budget{nodes("10"), scheduled("0", "0 10 * * 1-5", 8*time.Hour)}, now: monday9, total: 5, want: 10,
			budget: `budget 0 (nodes "10")`},
		{name: "schedule's window over", budgets: []karpv1.Budget{scheduled("0", "0 9 * * *", 30*time.Minute)}, now: monday9.Add(time.Minute), total: 5, want: Unlimited},
		{name: "schedule not on weekends", budgets: []karpv1.Budget{scheduled("0", "0 9 * * 1-5", 8*time.Hour)}, now: monday9.AddDate(0, 0, -1), total: 5, want: Unlimited},
		{name: "window spans midnight", budgets: []karpv1.Budget{scheduled("0", "0 22 * * *", 10*time.Hour)}, now: monday9.Add(-2 * time.Hour), total: 5, want: 0},
		{name: "descriptor @daily", budgets: []karpv1.Budget{scheduled("1", "@daily", 10*time.Hour)}, now: monday9, total: 5, want: 1},
		{name: "descriptor @hourly inactive", budgets: []karpv1.Budget{scheduled("1", "@hourly", 10*time.Minute)}, now: monday9, total: 5, want: Unlimited},
		{name: "schedule is in UTC", budgets: []karpv1.Budget{scheduled("0", "0 9 * * *", time.Hour)}, now: monday9.In(time.FixedZone("UTC+5", 5*3600)), total: 5, want: 0},
		{name: "budget for another reason does not apply", budgets: []karpv1.Budget{forReasons(nodes("0"), drifted)}, reason: empty, total: 5, want: Unlimited},
		{name: "budget for this reason applies", budgets: []karpv1.Budget{nodes("10"), forReasons(nodes("0"), drifted, empty)}, reason: empty, total: 5, want: 0,
			why: `budget 1 (nodes "0", reasons Drifted,Empty) allows 0 of 5 nodes (Empty)`},
		{name: "reasonless budget applies to every reason", budgets: []karpv1.Budget{forReasons(nodes("0"), empty), nodes("2")}, reason: drifted, total: 5, want: 2},
		{name: "schedule that does not parse blocks", budgets: []karpv1.Budget{nodes("10"), scheduled("5", "61 * * * *", time.Hour)}, now: monday9, total: 5, want: 0,
			budget: `budget 1 (nodes "5", schedule "61 * * * *", duration 1h)`,
			why:    `budget 1 (nodes "5", schedule "61 * * * *", duration 1h) is invalid (schedule "61 * * * *" does not parse`},
		{name: "an invalid budget for another reason still blocks", budgets: []karpv1.Budget{forReasons(scheduled("5", "not a cron", time.Hour), drifted)}, reason: empty, total: 5, want: 0,
			why: "is invalid"},
		{name: "a schedule naming a time zone blocks", budgets: []karpv1.Budget{scheduled("5", "TZ=Europe/Paris 0 9 * * *", time.Hour)}, now: monday9, total: 5, want: 0,
			why: "schedules are in UTC"},
		{name: "schedule without duration blocks", budgets: []karpv1.Budget{{Nodes: "1", Schedule: new("@daily")}}, total: 5, want: 0,
			why: "schedule and duration must be set together"},
		{name: "nodes that are no number block", budgets: []karpv1.Budget{nodes("many")}, total: 5, want: 0,
			why: `nodes "many" is neither a count nor a percentage`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.reason == "" {
				tc.reason = empty
			}
			if tc.now.IsZero() {
				tc.now = monday9
			}
			got := Allowed(tc.budgets, tc.reason, tc.now, tc.total, tc.disrupting)
			assert.Equal(t, tc.want, got.Nodes)
			if tc.budget != "" {
				assert.Equal(t, tc.budget, got.Budget)
			}
			if tc.want == Unlimited {
				assert.Empty(t, got.Budget)
			}
			if tc.want == 0 {
				assert.NotEmpty(t, got.Why)
				assert.Contains(t, got.Why, tc.why)
			} else {
				assert.Empty(t, got.Why)
			}
		})
	}
}

func TestDisrupting(t *testing.T) {
	deleting := metav1.Now()
	claim := func(o func(*karpv1.NodeClaim)) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
		if o != nil {
			o(nc)
		}
		return nc
	}
	node := func(o func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"},
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		if o != nil {
			o(n)
		}
		return n
	}
	cases := []struct {
		name string
		nc   *karpv1.NodeClaim
		node *corev1.Node
		want bool
	}{
		{"a live claim and node", claim(nil), node(nil), false},
		{"a live claim without node", claim(nil), nil, false},
		{"claim being deleted", claim(func(nc *karpv1.NodeClaim) { nc.DeletionTimestamp = &deleting }), node(nil), true},
		{"claim being deleted, node gone", claim(func(nc *karpv1.NodeClaim) { nc.DeletionTimestamp = &deleting }), nil, true},
		{"claim decided on", claim(func(nc *karpv1.NodeClaim) { nc.Annotations = map[string]string{DecisionAnnotation: "Underutilized"} }), node(nil), true},
		{"node being deleted", claim(nil), node(func(n *corev1.Node) { n.DeletionTimestamp = &deleting }), true},
		{"node tainted disrupted", claim(nil), node(func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, karpv1.DisruptedNoScheduleTaint) }), true},
		{"node not ready", claim(nil), node(func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }), true},
		{"node without a Ready condition", claim(nil), node(func(n *corev1.Node) { n.Status.Conditions = nil }), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Disrupting(clusterstate.NodeView{Claim: tc.nc, Node: tc.node}))
		})
	}
}
