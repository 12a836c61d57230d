// How a budget is read: Allowed (the ledger calls it). Each budget caps the nodes disrupted at
// once: a count ("5") or a percentage of the pool's nodes ("10%", rounded up, as Kubernetes rounds
// a PDB's maxUnavailable). A budget with a schedule (cron, UTC) and a duration applies only for
// the duration after each firing; one with reasons only to those reasons. The most restrictive
// budget that applies wins, and what is already disrupting is taken off it. A budget that cannot
// be read (a schedule that does not parse, a count that is no count) blocks every disruption of
// the pool: fail closed, as Karpenter does.

package disruption

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// Unlimited is Allowance.Nodes when no budget applies.
const Unlimited = math.MaxInt32

// Allowance is how many more of a pool's nodes may be disrupted now for a reason, and the
// budget that binds.
type Allowance struct {
	// Nodes is how many more nodes may be disrupted now; Unlimited when no budget applies.
	Nodes int
	// Budget is the binding budget in words, e.g.
	// `budget 0 (nodes "0", schedule "0 9 * * 1-5", duration 8h)`; empty when none applies.
	Budget string
	// Why is a full sentence when Nodes == 0, e.g.
	// `budget 0 (nodes "1") allows 1 of 5 nodes (Empty) and 1 is already disrupting`.
	Why string
}

// Allowed is how many more of a pool's total nodes may be disrupted now for reason, disrupting
// of them being disrupted already. No budgets at all (nil or empty) allow any number.
func Allowed(budgets []karpv1.Budget, reason karpv1.DisruptionReason, now time.Time, total, disrupting int) Allowance {
	limit, binding := Unlimited, -1
	for i, b := range budgets {
		n, err := allows(b, now, total)
		if err != nil {
			// Fail closed whatever reasons the budget names: it says nothing we can trust.
			return Allowance{Budget: Describe(i, b),
				Why: fmt.Sprintf("%s is invalid (%v): no node of the pool is disrupted (%s) until it is fixed", Describe(i, b), err, reason)}
		}
		if !appliesTo(b, reason) || n >= limit {
			continue
		}
		limit, binding = n, i
	}
	if binding < 0 {
		return Allowance{Nodes: Unlimited}
	}
	a := Allowance{Nodes: max(0, limit-disrupting), Budget: Describe(binding, budgets[binding])}
	if a.Nodes == 0 {
		a.Why = fmt.Sprintf("%s allows %d of %d %s (%s)", a.Budget, limit, total, plural(total, "node", "nodes"), reason)
		if disrupting > 0 {
			a.Why += fmt.Sprintf(" and %d %s already disrupting", disrupting, plural(disrupting, "is", "are"))
		}
	}
	return a
}

// allows is how many nodes of total the budget lets be disrupted at once now: Unlimited while
// its schedule is not active.
func allows(b karpv1.Budget, now time.Time, total int) (int, error) {
	active, err := Active(b, now)
	if err != nil {
		return 0, err
	}
	n, err := Nodes(b.Nodes, total)
	if err != nil {
		return 0, err
	}
	if !active {
		return Unlimited, nil
	}
	return n, nil
}

// Nodes reads a budget's nodes: a count ("5"), or a percentage ("10%") of total rounded up.
func Nodes(nodes string, total int) (int, error) {
	if pct, ok := strings.CutSuffix(nodes, "%"); ok {
		p, err := strconv.Atoi(pct)
		if err != nil || p < 0 || p > 100 {
			return 0, fmt.Errorf("nodes %q is not a percentage from 0%% to 100%%", nodes)
		}
		return (p*total + 99) / 100, nil
	}
	n, err := strconv.Atoi(nodes)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("nodes %q is neither a count nor a percentage", nodes)
	}
	return n, nil
}

// Active reports whether a budget applies at now: always without a schedule; with one, for
// its duration after each firing of the schedule (UTC), which is so when the schedule fires
// between now−duration (excluded) and now (included).
func Active(b karpv1.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil && b.Duration == nil {
		return true, nil
	}
	if b.Schedule == nil || b.Duration == nil {
		return false, fmt.Errorf("schedule and duration must be set together")
	}
	s, err := parseSchedule(*b.Schedule)
	if err != nil {
		return false, err
	}
	now = now.UTC()
	return !s.Next(now.Add(-b.Duration.Duration)).After(now), nil
}

// parseSchedule reads a cron schedule as Karpenter does: five fields or an @-descriptor, UTC.
func parseSchedule(spec string) (cron.Schedule, error) {
	if strings.HasPrefix(strings.TrimSpace(spec), "TZ=") || strings.HasPrefix(strings.TrimSpace(spec), "CRON_TZ=") {
		return nil, fmt.Errorf("schedule %q names a time zone: schedules are in UTC", spec)
	}
	s, err := cron.ParseStandard("TZ=UTC " + spec)
	if err != nil {
		return nil, fmt.Errorf("schedule %q does not parse: %w", spec, err)
	}
	return s, nil
}

// appliesTo reports whether a budget caps disruptions for reason: all reasons when it names none.
func appliesTo(b karpv1.Budget, reason karpv1.DisruptionReason) bool {
	return len(b.Reasons) == 0 || slices.Contains(b.Reasons, reason)
}

// Describe names the i-th budget of a pool in words, e.g.
// `budget 1 (nodes "0", reasons Drifted,Underutilized, schedule "0 9 * * 1-5", duration 8h)`.
func Describe(i int, b karpv1.Budget) string {
	parts := []string{fmt.Sprintf("nodes %q", b.Nodes)}
	if len(b.Reasons) > 0 {
		rs := make([]string, len(b.Reasons))
		for j, r := range b.Reasons {
			rs[j] = string(r)
		}
		parts = append(parts, "reasons "+strings.Join(rs, ","))
	}
	if b.Schedule != nil {
		parts = append(parts, fmt.Sprintf("schedule %q", *b.Schedule))
	}
	if b.Duration != nil {
		parts = append(parts, "duration "+karpv1.FormatDuration(b.Duration.Duration))
	}
	return fmt.Sprintf("budget %d (%s)", i, strings.Join(parts, ", "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ReplacesAnnotation on a replacement NodeClaim names (comma-separated) the claims it replaces.
// While any of them is still there the replacement waits for their pods: it is not empty in the
// sense of emptiness, nor a consolidation candidate.
const ReplacesAnnotation = "fleetwright.io/replaces"

// Replacing reports whether the claim is a replacement still waiting for the pods of a claim it
// replaces; exists says whether a claim of that name is still there.
func Replacing(nc *karpv1.NodeClaim, exists func(name string) bool) bool {
	v := nc.Annotations[ReplacesAnnotation]
	if v == "" {
		return false
	}
	for _, old := range strings.Split(v, ",") {
		if exists(old) {
			return true
		}
	}
	return false
}
