package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// disrupt is one disruption pass (see disruption.go).
func (s *scheduler) disrupt(ctx context.Context) error {
	start := s.now()
	st, err := s.readDisruption()
	if err != nil {
		return err
	}
	s.podEvents.forget(func(node string) bool { _, ok := st.byNode[node]; return ok })
	inFlight, err := s.advance(ctx, st)
	if err != nil {
		return err
	}
	var errs []error
	// One consolidation at a time: the next is decided on the cluster the last one left.
	if !inFlight {
		errs = append(errs, s.consolidate(ctx, st))
	}
	errs = append(errs, s.replaceDrifted(ctx, st))
	s.metrics.disruptionSeconds.Observe(s.now().Sub(start).Seconds())
	return errors.Join(errs...)
}

// consolidate finds at most one consolidation and decides it.
func (s *scheduler) consolidate(ctx context.Context, st *disruptionState) error {
	cands, blocked, causes := s.candidates(st)
	s.markConsolidatable(ctx, st)
	in := scheduling.ConsolidationInput{
		Input:             s.input(st.v, s.withDeletionCosts(st.nodes, cands), nil),
		Candidates:        cands,
		MinSavings:        map[string]float64{},
		DefaultMinSavings: s.cfg.MinSavings,
		SpotToSpot:        s.cfg.SpotToSpot,
		Allowed:           map[string]int{},
	}
	budgetWhy := map[string]string{}
	for _, c := range cands {
		if _, done := in.Allowed[c.NodePool]; done {
			continue
		}
		in.MinSavings[c.NodePool] = s.minSavings(st.pools[c.NodePool])
		a := st.allowance(c.NodePool, karpv1.DisruptionReasonUnderutilized)
		in.Allowed[c.NodePool] = a.Nodes
		budgetWhy[c.NodePool] = a.Why
	}
	s.metrics.eligible.Set(float64(len(cands)))
	if len(cands) == 0 {
		s.reportBlocked(ctx, blocked, causes, nil, st)
		return nil
	}
	ctx, span := tracer.Start(ctx, "scheduler.consolidate")
	defer span.End()
	res, err := scheduling.Consolidate(in)
	if err != nil {
		return fmt.Errorf("consolidating: %w", err)
	}
	span.SetAttributes(attribute.Int("fleetwright.candidates", len(cands)), attribute.Int("fleetwright.rejected", len(res.Rejected)))
	for _, r := range res.Rejected {
		// The core says "budget…" in general terms; the budget that binds says more.
		if strings.HasPrefix(r.Reason, "budget") {
			if c, ok := candidateOf(cands, r.Node); ok && budgetWhy[c.NodePool] != "" {
				r.Reason = budgetWhy[c.NodePool]
			}
		}
		blocked = append(blocked, r)
	}
	s.reportBlocked(ctx, blocked, causes, res.Command, st)
	if res.Command == nil {
		return nil
	}
	cmd := res.Command
	span.SetAttributes(attribute.String("fleetwright.action", string(cmd.Kind)), attribute.StringSlice("fleetwright.nodes", cmd.Nodes),
		attribute.Float64("fleetwright.savings_usd_per_hour", cmd.SavingsUSDPerHour), attribute.String("fleetwright.why", cmd.Why))
	var old []*karpv1.NodeClaim
	for _, n := range cmd.Nodes {
		if nc := st.byNode[n]; nc != nil {
			old = append(old, nc)
		}
	}
	var reps []scheduling.NodeClaim
	if cmd.Replacement != nil {
		reps = append(reps, *cmd.Replacement)
	}
	return s.decide(ctx, st, decisionSpec{reason: karpv1.DisruptionReasonUnderutilized, action: string(cmd.Kind), old: old,
		replacements: reps, why: cmd.Why, savings: cmd.SavingsUSDPerHour})
}

// markConsolidatable keeps Karpenter's Consolidatable condition: True on the claims of
// consolidating pools that have been candidates for their pool's consolidateAfter, removed once
// a pod arrives or leaves.
func (s *scheduler) markConsolidatable(ctx context.Context, st *disruptionState) {
	for name, ok := range st.consolidatable {
		nc := st.claims[name]
		var err error
		switch has := nc.IsTrue(karpv1.ConditionTypeConsolidatable); {
		case ok && !has:
			err = s.setCondition(ctx, nc, metav1.Condition{Type: karpv1.ConditionTypeConsolidatable, Status: metav1.ConditionTrue,
				Reason: "Consolidatable", Message: "no pod arrived on or left the node for its pool's consolidateAfter",
				LastTransitionTime: metav1.NewTime(st.now)}, false)
		case !ok && nc.Condition(karpv1.ConditionTypeConsolidatable) != nil:
			err = s.setCondition(ctx, nc, metav1.Condition{Type: karpv1.ConditionTypeConsolidatable}, true)
		}
		if err != nil {
			s.rt.Log.Warn().Ctx(ctx).Err(err).Str("nodeclaim", name).Msg("updating the Consolidatable condition")
		}
	}
}

func candidateOf(cands []scheduling.Candidate, node string) (scheduling.Candidate, bool) {
	for _, c := range cands {
		if c.Node == node {
			return c, true
		}
	}
	return scheduling.Candidate{}, false
}

// reportBlocked tells, once per node and reason, why a node is not consolidated: an event on
// its NodeClaim and Node ("Unconsolidatable", as Karpenter), a log line, a BLOCKED
// DisruptionDecision on the bus, and the blocked-nodes gauge by cause.
func (s *scheduler) reportBlocked(ctx context.Context, blocked []scheduling.Rejection, causes map[string]string, cmd *scheduling.Command, st *disruptionState) {
	chosen := map[string]bool{}
	if cmd != nil {
		for _, n := range cmd.Nodes {
			chosen[n] = true
		}
	}
	byCause := map[string]int{}
	for _, b := range blocked {
		if chosen[b.Node] {
			continue
		}
		cause := causes[b.Node]
		if cause == "" {
			cause = rejectionCause(b.Reason)
		}
		byCause[cause]++
		nc := st.byNode[b.Node]
		if nc == nil {
			continue
		}
		s.once("unconsolidatable/"+string(nc.UID)+"/"+b.Reason, func() {
			s.rt.Log.Info().Ctx(ctx).Str("nodeclaim", nc.Name).Str("node", b.Node).Str("why", b.Reason).Msg("not consolidating node")
			s.tell(nc, b.Node, corev1.EventTypeNormal, "Unconsolidatable", b.Reason)
			s.announce(ctx, blockedMessage(nc, karpv1.DisruptionReasonUnderutilized, b.Reason, st.now))
		})
	}
	s.metrics.blocked.Reset()
	for cause, n := range byCause {
		s.metrics.blocked.WithLabelValues(cause).Set(float64(n))
	}
}

// rejectionCause names a rejection's cause for the blocked-nodes gauge.
func rejectionCause(why string) string {
	switch {
	case strings.Contains(why, "budget"):
		return "budget"
	case strings.Contains(why, "threshold"):
		return "savings-threshold"
	case strings.Contains(why, "would not fit") || strings.Contains(why, "would not schedule"):
		return "pods-would-not-fit"
	case strings.Contains(why, "spot"):
		return "spot"
	case strings.Contains(why, "cheaper"):
		return "no-cheaper-replacement"
	}
	return "other"
}

// tell records an event on the NodeClaim and, when there is one, its Node.
func (s *scheduler) tell(nc *karpv1.NodeClaim, node, eventType, reason, msg string) {
	s.recorder.Event(nc, eventType, reason, msg)
	if node != "" {
		ref := &corev1.ObjectReference{Kind: "Node", Name: node, UID: "", APIVersion: "v1"}
		if n, ok := s.cluster.Node(node); ok {
			ref.UID = n.UID
		}
		s.recorder.Event(ref, eventType, reason, msg)
	}
}

// once runs f the first time key is seen (bounded: the memory is cleared when it grows large,
// at worst repeating a log line and an event).
func (s *scheduler) once(key string, f func()) {
	s.onceMu.Lock()
	if s.seen == nil || len(s.seen) > 10000 {
		s.seen = map[string]time.Time{}
	}
	_, done := s.seen[key]
	if !done {
		s.seen[key] = s.now()
	}
	s.onceMu.Unlock()
	if !done {
		f()
	}
}

// replaceDrifted replaces, in each pool, its oldest drifted claim if the pool's budget for
// Drifted allows: the node's pods are solved anew without it, the claims that needs are the
// replacements (none: the node is simply removed). Pods that would not schedule block it.
func (s *scheduler) replaceDrifted(ctx context.Context, st *disruptionState) error {
	byPool := map[string][]*karpv1.NodeClaim{}
	for _, nc := range st.claims {
		if nc.IsTrue(karpv1.ConditionTypeDrifted) && nc.DeletionTimestamp == nil && nc.Annotations[decisionKey] == "" {
			byPool[claimPool(nc)] = append(byPool[claimPool(nc)], nc)
		}
	}
	var errs []error
	for _, pool := range slices.Sorted(maps.Keys(byPool)) {
		claims := byPool[pool]
		sort.Slice(claims, func(i, j int) bool {
			if !claims[i].CreationTimestamp.Equal(&claims[j].CreationTimestamp) {
				return claims[i].CreationTimestamp.Before(&claims[j].CreationTimestamp)
			}
			return claims[i].Name < claims[j].Name
		})
		if a := st.allowance(pool, karpv1.DisruptionReasonDrifted); a.Nodes <= 0 {
			for _, nc := range claims {
				s.once("drift-blocked/"+string(nc.UID)+"/"+a.Why, func() {
					s.rt.Log.Info().Ctx(ctx).Str("nodeclaim", nc.Name).Str("why", a.Why).Msg("not replacing drifted node")
					s.tell(nc, nc.Status.NodeName, corev1.EventTypeNormal, "DisruptionBlocked", "drifted, not replaced yet: "+a.Why)
					s.announce(ctx, blockedMessage(nc, karpv1.DisruptionReasonDrifted, a.Why, st.now))
				})
			}
			continue
		}
		for _, nc := range claims {
			decided, err := s.replaceOneDrifted(ctx, st, nc)
			if err != nil {
				errs = append(errs, err)
			}
			if decided || err != nil {
				break // one per pool and pass: the next is judged on the cluster this one leaves
			}
		}
	}
	return errors.Join(errs...)
}

// replaceOneDrifted decides the replacement of one drifted claim, or reports what blocks it.
func (s *scheduler) replaceOneDrifted(ctx context.Context, st *disruptionState, nc *karpv1.NodeClaim) (bool, error) {
	blockedBy := func(why string) (bool, error) {
		s.once("drift-blocked/"+string(nc.UID)+"/"+why, func() {
			s.rt.Log.Info().Ctx(ctx).Str("nodeclaim", nc.Name).Str("why", why).Msg("not replacing drifted node")
			s.tell(nc, nc.Status.NodeName, corev1.EventTypeNormal, "DisruptionBlocked", "drifted, not replaced: "+why)
			s.announce(ctx, blockedMessage(nc, karpv1.DisruptionReasonDrifted, why, st.now))
		})
		return false, nil
	}
	if name := nc.Status.NodeName; name != "" {
		node, ok := s.cluster.Node(name)
		if !ok {
			return false, nil
		}
		if why, _ := blocker(node, s.movablePods(name), st.pdbs); why != "" {
			return blockedBy(why)
		}
	}
	pods, others := s.without(st, nc)
	plan, err := scheduling.Solve(s.input(st.v, others, pods))
	if err != nil {
		return false, fmt.Errorf("solving the pods of drifted nodeclaim %s: %w", nc.Name, err)
	}
	if len(plan.Unschedulable) > 0 {
		u := plan.Unschedulable[0]
		return blockedBy(fmt.Sprintf("pods would not schedule elsewhere: %s: %s", podName(pods, u.PodUID), u.Reason))
	}
	why := "drifted"
	if c := nc.Condition(karpv1.ConditionTypeDrifted); c != nil {
		why = fmt.Sprintf("drifted (%s): %s", c.Reason, c.Message)
	}
	action := "Delete"
	if len(plan.NodeClaims) > 0 {
		action = "Replace"
	}
	return true, s.decide(ctx, st, decisionSpec{reason: karpv1.DisruptionReasonDrifted, action: action, old: []*karpv1.NodeClaim{nc},
		replacements: plan.NodeClaims, why: why})
}

// without splits the pass's nodes into the claim's movable pods and every other node: what a
// solve of the cluster without the claim's node starts from.
func (s *scheduler) without(st *disruptionState, nc *karpv1.NodeClaim) (pods []scheduling.Pod, others []scheduling.Node) {
	name := nc.Status.NodeName
	if name == "" {
		name = nc.Name // in flight: the node is the claim
	}
	movable := map[string]bool{}
	for _, p := range s.movablePods(name) {
		movable[string(p.UID)] = true
	}
	others = make([]scheduling.Node, 0, len(st.nodes))
	for _, n := range st.nodes {
		if n.Name != name {
			others = append(others, n)
			continue
		}
		for _, p := range n.Pods {
			if movable[p.UID] {
				pods = append(pods, p)
			}
		}
	}
	return pods, others
}

func podName(pods []scheduling.Pod, uid string) string {
	for _, p := range pods {
		if p.UID == uid {
			return p.Namespace + "/" + p.Name
		}
	}
	return uid
}
