package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// The voluntary methods, in Karpenter's order; the first that finds something to do makes the
// pass's command. Each takes from the ledger only what its budgets allow.

// command is one decision about to be made: the claims it removes and, for a replacement, the
// claims to launch first.
type command struct {
	reason       karpv1.DisruptionReason
	action       disruption.Action
	old          []*karpv1.NodeClaim
	replacements []scheduling.NodeClaim
	why          string
	savings      float64
}

// pools names the pools of the claims it removes, each once.
func (c command) pools() []string {
	var out []string
	for _, nc := range c.old {
		if p := claimPool(nc); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func (c command) claimNames() []string {
	out := make([]string, len(c.old))
	for i, nc := range c.old {
		out[i] = nc.Name
	}
	return out
}

// compute runs the methods in order and returns the first command one finds.
func (s *scheduler) compute(ctx context.Context, st *disruptionState) (command, bool, error) {
	s.reportHeldBack(ctx, st)
	start := time.Now()
	evaluated := func(reason karpv1.DisruptionReason, ct string) {
		s.metrics.karp.evaluation.WithLabelValues(lowerReason(reason), ct).Observe(time.Since(start).Seconds())
		start = time.Now()
	}
	cmd, ok := s.emptiness(ctx, st)
	evaluated(karpv1.DisruptionReasonEmpty, consolidationEmpty)
	if ok {
		return cmd, true, nil
	}
	cmd, ok, err := s.drift(ctx, st)
	evaluated(karpv1.DisruptionReasonDrifted, "")
	if err != nil || ok {
		return cmd, ok, err
	}
	cmd, ok, err = s.consolidation(ctx, st)
	evaluated(karpv1.DisruptionReasonUnderutilized, consolidationType(karpv1.DisruptionReasonUnderutilized, len(cmd.old)))
	return cmd, ok, err
}

// emptiness removes the empty nodes whose pools allow it (WhenEmpty or WhenEmptyOrUnderutilized,
// consolidateAfter past since their last pod event), oldest first, as many per pool as its
// budgets for Empty allow: one command, no replacements.
func (s *scheduler) emptiness(ctx context.Context, st *disruptionState) (command, bool) {
	byPool := map[string][]disruption.Candidate{}
	for _, c := range st.cands {
		if c.Empty() && c.Consolidatable && !c.Blocked() {
			byPool[c.PoolName()] = append(byPool[c.PoolName()], c)
		}
	}
	cmd := command{reason: karpv1.DisruptionReasonEmpty, action: disruption.ActionDelete}
	for _, pool := range slices.Sorted(maps.Keys(byPool)) {
		cands := byPool[pool]
		sort.SliceStable(cands, func(i, j int) bool {
			if !cands[i].Since.Equal(cands[j].Since) {
				return cands[i].Since.Before(cands[j].Since)
			}
			return cands[i].Name() < cands[j].Name()
		})
		n := min(st.ledger.Allowed(pool, karpv1.DisruptionReasonEmpty).Nodes, len(cands))
		for _, c := range cands[:n] {
			cmd.old = append(cmd.old, c.Claim)
		}
		st.ledger.Take(pool, n)
		if n < len(cands) {
			why := st.ledger.Allowed(pool, karpv1.DisruptionReasonEmpty).Why // with this command's taken
			for _, c := range cands[n:] {
				s.blocked(ctx, st, c.Claim, karpv1.DisruptionReasonEmpty, disruption.CauseBudget, "empty node not removed: "+why)
			}
		}
	}
	if len(cmd.old) == 0 {
		return command{}, false
	}
	cmd.why = fmt.Sprintf("empty for its pool's consolidateAfter (%d node(s))", len(cmd.old))
	return cmd, true
}

// drift replaces drifted nodes: in each pool whose budget for Drifted allows, its empty drifted
// nodes are removed at once; else the oldest drifted node whose pods schedule elsewhere (on
// existing nodes and the replacements the solve plans) goes. Pods holding a node back (a
// do-not-disrupt annotation, a PodDisruptionBudget) stop its drift unless its NodeClaim has a
// terminationGracePeriod: then the drain waits for them, at most that long (Karpenter v1's
// eventual disruption).
func (s *scheduler) drift(ctx context.Context, st *disruptionState) (command, bool, error) {
	byPool := map[string][]disruption.Candidate{}
	for _, c := range st.cands {
		if c.Drifted != "" {
			byPool[c.PoolName()] = append(byPool[c.PoolName()], c)
		}
	}
	for _, pool := range slices.Sorted(maps.Keys(byPool)) {
		cands := byPool[pool]
		sort.SliceStable(cands, func(i, j int) bool {
			if !cands[i].Claim.CreationTimestamp.Equal(&cands[j].Claim.CreationTimestamp) {
				return cands[i].Claim.CreationTimestamp.Before(&cands[j].Claim.CreationTimestamp)
			}
			return cands[i].Name() < cands[j].Name()
		})
		a := st.ledger.Allowed(pool, karpv1.DisruptionReasonDrifted)
		if a.Nodes <= 0 {
			for _, c := range cands {
				s.blocked(ctx, st, c.Claim, karpv1.DisruptionReasonDrifted, disruption.CauseBudget, "drifted, not replaced yet: "+a.Why)
			}
			continue
		}
		var empty []*karpv1.NodeClaim
		var full []disruption.Candidate
		for _, c := range cands {
			switch {
			case c.Blocked() && !c.EventuallyDisruptable():
				s.blocked(ctx, st, c.Claim, karpv1.DisruptionReasonDrifted, c.Cause, "drifted, not replaced: "+c.Why)
			case c.Empty():
				empty = append(empty, c.Claim)
			default:
				full = append(full, c)
			}
		}
		if len(empty) > 0 {
			empty = empty[:min(len(empty), a.Nodes)]
			st.ledger.Take(pool, len(empty))
			return command{reason: karpv1.DisruptionReasonDrifted, action: disruption.ActionDelete, old: empty,
				why: fmt.Sprintf("drifted and empty (%d node(s))", len(empty))}, true, nil
		}
		for _, c := range full {
			cmd, why, err := s.driftOne(st, c)
			if err != nil {
				return command{}, false, err
			}
			if why != "" {
				s.blocked(ctx, st, c.Claim, karpv1.DisruptionReasonDrifted, disruption.CauseWouldNotFit, "drifted, not replaced: "+why)
				continue
			}
			st.ledger.Take(pool, 1)
			return cmd, true, nil
		}
	}
	return command{}, false, nil
}

// driftOne plans the replacement of one drifted node: its pods solved anew without it; the
// claims that needs are its replacements. why says what keeps it (pods that would not schedule).
func (s *scheduler) driftOne(st *disruptionState, c disruption.Candidate) (command, string, error) {
	pods, others := s.without(st, c.Claim)
	plan, err := scheduling.Solve(s.input(st.v, others, pods))
	if err != nil {
		return command{}, "", fmt.Errorf("solving the pods of drifted nodeclaim %s: %w", c.Name(), err)
	}
	if len(plan.Unschedulable) > 0 {
		u := plan.Unschedulable[0]
		return command{}, fmt.Sprintf("pods would not schedule elsewhere: %s: %s", podName(pods, u.PodUID), u.Reason), nil
	}
	if dest, ok := uninitializedDestination(st, plan.Placements); ok {
		return command{}, fmt.Sprintf("its pods would move to %s, not initialized yet", dest), nil
	}
	why := "drifted"
	if cond := c.Claim.Condition(karpv1.ConditionTypeDrifted); cond != nil {
		why = fmt.Sprintf("drifted (%s): %s", cond.Reason, cond.Message)
	}
	cmd := command{reason: karpv1.DisruptionReasonDrifted, action: disruption.ActionDelete, old: []*karpv1.NodeClaim{c.Claim},
		replacements: plan.NodeClaims, why: why}
	if len(plan.NodeClaims) > 0 {
		cmd.action = disruption.ActionReplace
	}
	return cmd, "", nil
}

// consolidation runs the core over the underutilized candidates: multi-node, then single node
// (delete, or replace with one cheaper node), each pool within its budget for Underutilized.
func (s *scheduler) consolidation(ctx context.Context, st *disruptionState) (command, bool, error) {
	var cands []scheduling.Candidate
	var rejected []scheduling.Rejection
	causes := map[string]disruption.Cause{}
	for _, c := range st.cands {
		if c.Empty() || !c.Consolidatable || c.Pool.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized {
			continue
		}
		if c.Blocked() {
			rejected = append(rejected, scheduling.Rejection{Node: c.Node.Name, Reason: c.Why})
			causes[c.Node.Name] = c.Cause
			continue
		}
		cc, why := coreCandidate(st, c)
		if why != "" {
			rejected = append(rejected, scheduling.Rejection{Node: c.Node.Name, Reason: why})
			causes[c.Node.Name] = disruption.CauseUnpriced
			continue
		}
		cands = append(cands, cc)
	}
	res, err := s.consolidate(ctx, st, cands)
	if err != nil {
		return command{}, false, err
	}
	rejected = append(rejected, res.Rejected...)
	s.reportUnconsolidatable(ctx, st, rejected, causes, res.Command)
	if res.Command == nil {
		return command{}, false, nil
	}
	if dest, ok := uninitializedDestination(st, res.Command.Placements); ok {
		s.rt.Log.Debug().Ctx(ctx).Strs("nodes", res.Command.Nodes).Str("destination", dest).Msg("consolidation waits: its pods would move to a node not initialized yet")
		return command{}, false, nil
	}
	return s.consolidationCommand(st, res.Command), true, nil
}

// consolidate asks the core for one consolidation among the candidates, each pool within what
// its budget for Underutilized allows (the ledger's reason why on a refusal).
func (s *scheduler) consolidate(ctx context.Context, st *disruptionState, cands []scheduling.Candidate) (scheduling.ConsolidationResult, error) {
	in := scheduling.ConsolidationInput{
		Input:      s.input(st.v, s.withDeletionCosts(st.nodes, cands), nil),
		Candidates: cands, MinSavings: map[string]float64{}, DefaultMinSavings: s.cfg.MinSavings, SpotToSpot: s.cfg.SpotToSpot,
		Allowed: map[string]int{},
	}
	budgetWhy := map[string]string{}
	for _, c := range cands {
		if _, done := in.Allowed[c.NodePool]; done {
			continue
		}
		in.MinSavings[c.NodePool] = s.minSavings(st.pools[c.NodePool])
		a := st.ledger.Allowed(c.NodePool, karpv1.DisruptionReasonUnderutilized)
		in.Allowed[c.NodePool] = a.Nodes
		budgetWhy[c.NodePool] = a.Why
	}
	if len(cands) == 0 {
		return scheduling.ConsolidationResult{}, nil
	}
	_, span := tracer.Start(ctx, "scheduler.consolidate")
	defer span.End()
	res, err := scheduling.Consolidate(in)
	if err != nil {
		return res, fmt.Errorf("consolidating: %w", err)
	}
	for i, r := range res.Rejected {
		// The core says "budget…" in general terms; the budget that binds says more.
		if strings.HasPrefix(r.Reason, "budget") {
			for _, c := range cands {
				if c.Node == r.Node && budgetWhy[c.NodePool] != "" {
					res.Rejected[i].Reason = budgetWhy[c.NodePool]
				}
			}
		}
	}
	span.SetAttributes(attribute.Int("fleetwright.candidates", len(cands)), attribute.Int("fleetwright.rejected", len(res.Rejected)))
	if cmd := res.Command; cmd != nil {
		span.SetAttributes(attribute.String("fleetwright.action", string(cmd.Kind)), attribute.StringSlice("fleetwright.nodes", cmd.Nodes),
			attribute.Float64("fleetwright.savings_usd_per_hour", cmd.SavingsUSDPerHour), attribute.String("fleetwright.why", cmd.Why))
	}
	return res, nil
}

// consolidationCommand turns the core's command into a decision to make, taking its nodes from
// the ledger.
func (s *scheduler) consolidationCommand(st *disruptionState, cc *scheduling.Command) command {
	cmd := command{reason: karpv1.DisruptionReasonUnderutilized, action: disruption.ActionDelete, why: cc.Why, savings: cc.SavingsUSDPerHour}
	if cc.Kind == scheduling.CommandReplace {
		cmd.action = disruption.ActionReplace
	}
	for _, n := range cc.Nodes {
		if nc := st.byNode[n]; nc != nil {
			cmd.old = append(cmd.old, nc)
			st.ledger.Take(claimPool(nc), 1)
		}
	}
	if cc.Replacement != nil {
		cmd.replacements = append(cmd.replacements, *cc.Replacement)
	}
	return cmd
}

// revalidate judges a command computed --consolidation-validation ago on the cluster as it is
// now: every claim must still be a candidate that is not held back, and the method must come to
// the same command (a consolidation's replacement no dearer). It returns the command to act on
// (fresh replacements), or why not.
func (s *scheduler) revalidate(ctx context.Context, st *disruptionState, old command) (command, string) {
	current := map[string]disruption.Candidate{}
	for _, c := range st.cands {
		current[c.Name()] = c
	}
	for _, nc := range old.old {
		c, ok := current[nc.Name]
		switch {
		case !ok:
			return old, "nodeclaim " + nc.Name + " is no longer a candidate"
		case c.Blocked():
			return old, "nodeclaim " + nc.Name + ": " + c.Why
		case !c.Consolidatable:
			return old, "a pod arrived on or left nodeclaim " + nc.Name
		case old.reason == karpv1.DisruptionReasonEmpty && !c.Empty():
			return old, "nodeclaim " + nc.Name + " is no longer empty"
		}
		if a := st.ledger.Allowed(c.PoolName(), old.reason); a.Nodes <= 0 {
			return old, "nodeclaim " + nc.Name + ": " + a.Why
		}
	}
	if old.reason == karpv1.DisruptionReasonEmpty {
		for _, nc := range old.old {
			st.ledger.Take(claimPool(nc), 1)
		}
		fresh := old
		fresh.old = nil
		for _, nc := range old.old {
			fresh.old = append(fresh.old, st.claims[nc.Name])
		}
		return fresh, ""
	}
	var cands []scheduling.Candidate
	for _, nc := range old.old {
		cc, why := coreCandidate(st, current[nc.Name])
		if why != "" {
			return old, why
		}
		cands = append(cands, cc)
	}
	res, err := s.consolidate(ctx, st, cands)
	if err != nil {
		return old, err.Error()
	}
	cc := res.Command
	if cc == nil || len(cc.Nodes) != len(old.old) {
		return old, "the consolidation no longer holds"
	}
	fresh := s.consolidationCommand(st, cc)
	if fresh.action != old.action {
		return old, fmt.Sprintf("it would now %s rather than %s", strings.ToLower(string(fresh.action)), strings.ToLower(string(old.action)))
	}
	if len(old.replacements) > 0 && len(fresh.replacements) > 0 && fresh.replacements[0].PriceUSDPerHour > old.replacements[0].PriceUSDPerHour {
		return old, fmt.Sprintf("its replacement would now cost %.4f/h, not %.4f/h", fresh.replacements[0].PriceUSDPerHour, old.replacements[0].PriceUSDPerHour)
	}
	return fresh, ""
}

// reportHeldBack tells, once per claim and reason, why a node no method may take is held back:
// a pending pod waits for it, or its node is annotated do-not-disrupt.
func (s *scheduler) reportHeldBack(ctx context.Context, st *disruptionState) {
	for _, b := range st.blocked {
		nc := st.claims[b.Claim]
		if nc == nil || b.Cause == disruption.CauseNominated {
			continue // a nomination is short-lived: not worth an event
		}
		s.blocked(ctx, st, nc, "", b.Cause, b.Why)
	}
}

// blocked tells once that a claim would be disrupted (for reason; "" for any) but is held back.
func (s *scheduler) blocked(ctx context.Context, st *disruptionState, nc *karpv1.NodeClaim, reason karpv1.DisruptionReason, cause disruption.Cause, why string) {
	s.once("blocked/"+string(nc.UID)+"/"+string(reason)+"/"+why, func() {
		s.rt.Log.Info().Ctx(ctx).Str("nodeclaim", nc.Name).Str("reason", string(reason)).Str("cause", string(cause)).Str("why", why).
			Msg("not disrupting node")
		s.tell(nc, nc.Status.NodeName, corev1.EventTypeNormal, "DisruptionBlocked", why)
		s.announce(ctx, blockedMessage(nc, reason, why, st.now))
	})
}

// reportUnconsolidatable tells, once per node and reason, why a candidate is not consolidated:
// an event on its NodeClaim and Node ("Unconsolidatable", as Karpenter), a log line, a BLOCKED
// DisruptionDecision on the bus, and the blocked-nodes gauge by cause.
func (s *scheduler) reportUnconsolidatable(ctx context.Context, st *disruptionState, rejected []scheduling.Rejection,
	causes map[string]disruption.Cause, cmd *scheduling.Command) {
	chosen := map[string]bool{}
	if cmd != nil {
		for _, n := range cmd.Nodes {
			chosen[n] = true
		}
	}
	byCause := map[disruption.Cause]int{}
	for _, r := range rejected {
		if chosen[r.Node] {
			continue
		}
		cause := causes[r.Node]
		if cause == "" {
			cause = disruption.Cause(r.Cause)
		}
		if cause == "" {
			cause = disruption.CauseOther
		}
		byCause[cause]++
		nc := st.byNode[r.Node]
		if nc == nil {
			continue
		}
		s.once("unconsolidatable/"+string(nc.UID)+"/"+r.Reason, func() {
			s.rt.Log.Info().Ctx(ctx).Str("nodeclaim", nc.Name).Str("node", r.Node).Str("why", r.Reason).Msg("not consolidating node")
			s.tell(nc, r.Node, corev1.EventTypeNormal, "Unconsolidatable", r.Reason)
			s.announce(ctx, blockedMessage(nc, karpv1.DisruptionReasonUnderutilized, r.Reason, st.now))
		})
	}
	s.metrics.blocked.Reset()
	for cause, n := range byCause {
		s.metrics.blocked.WithLabelValues(string(cause)).Set(float64(n))
	}
}
