package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// This file is the one decider of disruption: the scheduler's leader decides every voluntary
// disruption (empty, underutilized, drifted nodes) and expiry, one method at a time, against one
// budget ledger; the terminator carries out what is decided, by draining and terminating every
// NodeClaim that is deleted. The rules are pkg/disruption's; this file gathers the cluster,
// calls them, and acts. A pass (every --disruption-interval):
//
//	read: one joined view of claims, nodes, pools and pods (clusterstate.NodeView), the ledger
//	      (disruption.Ledger), the candidates and what holds the others back (disruption.Candidates)
//	advance every decision in flight (decision.go, disruption.Decision.Next: Karpenter v1's order)
//	      taint karpenter.sh/disrupted:NoSchedule ─► launch replacements ─► wait until Initialized
//	      (too slow or failed: untaint, delete them, clear the record) ─► delete the old NodeClaims
//	expire: claims past expireAfter are deleted (forceful, no budget; the drain is bounded by
//	      terminationGracePeriod)
//	decide one new command (methods.go): Emptiness ─► Drift ─► Consolidation (multi, then single
//	      node, scheduling.Consolidate); a consolidation or emptiness command is validated again
//	      --consolidation-validation (15 s) later before it is acted on (Karpenter's check that
//	      the cluster has not moved under it)
//
// A decision is recorded on the claims it removes (disruption.DecisionAnnotation) before
// anything else is done, so they count against their pools' budgets at once and a new leader
// carries it on. Every decision and block is logged, told in events on the NodeClaim and its Node
// (DisruptionLaunching, DisruptionWaitingReadiness, DisruptionTerminating, DisruptionAbandoned,
// DisruptionBlocked, Unconsolidatable), traced, and published as a DisruptionDecision on
// <prefix>.terminations.decisions (announce.go).

// replacesAnnotation on a replacement NodeClaim names the claims it replaces.
const replacesAnnotation = disruption.ReplacesAnnotation

// minSavingsAnnotation on a NodePool (or Provisioner) overrides --consolidation-min-savings for
// its nodes, as a percentage ("10%").
const minSavingsAnnotation = "fleetwright.io/consolidation-min-savings"

// disruptionState is one pass's read of the cluster for disruption.
type disruptionState struct {
	v      view
	now    time.Time
	views  []clusterstate.NodeView
	claims map[string]*karpv1.NodeClaim // by name
	byNode map[string]*karpv1.NodeClaim // by node name
	pools  map[string]clusterstate.Pool
	pdbs   []*policyv1.PodDisruptionBudget
	ledger *disruption.Ledger
	// nodes are every node and in-flight claim with its pods, for the core: nodes marked for
	// removal and replacements waiting for the pods of the nodes they replace take no pods.
	nodes []scheduling.Node
	// cands are the nodes voluntary methods may consider; blocked those held back, with why.
	cands   []disruption.Candidate
	blocked []disruption.Block
	// tainted are claims whose nodes this pass tainted (the cache has not caught up).
	tainted map[string]bool
}

func (s *scheduler) readDisruption() (*disruptionState, error) {
	v, err := s.read()
	if err != nil {
		return nil, err
	}
	st := &disruptionState{v: v, now: s.now(), views: s.cluster.NodeViews(), claims: map[string]*karpv1.NodeClaim{},
		byNode: map[string]*karpv1.NodeClaim{}, pools: map[string]clusterstate.Pool{}, pdbs: s.cluster.AllPDBs()}
	pools := s.cluster.Pools()
	for _, p := range pools {
		st.pools[p.Name] = p
	}
	for _, view := range st.views {
		st.claims[view.Name()] = view.Claim
		if n := view.NodeName(); n != "" {
			st.byNode[n] = view.Claim
		}
	}
	st.ledger = disruption.NewLedger(st.views, pools, st.now)
	exists := func(name string) bool { _, ok := st.claims[name]; return ok }
	st.nodes = s.nodes(v)
	for i, n := range st.nodes {
		nc := st.claims[n.Name]
		if nc == nil {
			nc = st.byNode[n.Name]
		}
		if nc == nil {
			continue
		}
		var node *corev1.Node
		if nc.Status.NodeName != "" {
			node, _ = s.cluster.Node(nc.Status.NodeName)
		}
		if disruption.Marked(nc, node) || disruption.Replacing(nc, exists) {
			st.nodes[i].MarkedForDeletion = true
		}
	}
	st.cands, st.blocked = disruption.Candidates(st.views, disruption.Inputs{PDBs: st.pdbs, Awaited: s.awaited(st), Exists: exists, Now: st.now,
		Bad: func(err error) {
			s.once("bad-do-not-disrupt/"+err.Error(), func() { s.rt.Log.Warn().Err(err).Msg("ignoring a do-not-disrupt annotation") })
		}})
	return st, nil
}

// awaited are the claims a pending pod waits for, which no voluntary method takes: a live
// nomination to them (podproj.NominationRule), or the last node launched for a pod still pending
// that did not hold it (podproj.LaunchLoopRule).
func (s *scheduler) awaited(st *disruptionState) map[string]disruption.Block {
	out := map[string]disruption.Block{}
	pending := s.pendingPods()
	for _, p := range pending {
		if n := s.nomination(p); n.Live && n.Claim != "" {
			if _, seen := out[n.Claim]; !seen {
				out[n.Claim] = disruption.Block{Cause: disruption.CauseNominated,
					Why: fmt.Sprintf("pending pod %s/%s is nominated to it", p.Namespace, p.Name)}
			}
		}
	}
	for claim, why := range s.cfg.LaunchLoop.Keeps(st.v.histories, pending) {
		if _, seen := out[claim]; !seen {
			out[claim] = disruption.Block{Cause: disruption.CauseLaunchLoop, Why: "kept: " + why}
		}
	}
	return out
}

// disrupt is one disruption pass: advance the decisions in flight, expire, and decide at most
// one new command.
func (s *scheduler) disrupt(ctx context.Context) error {
	start := s.now()
	defer func() { s.metrics.disruptionSeconds.Observe(s.now().Sub(start).Seconds()) }()
	st, err := s.readDisruption()
	if err != nil {
		return err
	}
	var errs []error
	errs = append(errs, s.markConsolidatable(ctx, st), s.advance(ctx, st), s.expire(ctx, st))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.metrics.eligible.Set(float64(len(st.cands)))
	s.observeDisruption(st)
	return s.decideNext(ctx, st)
}

// decideNext validates the command waiting for it, or computes the next one.
func (s *scheduler) decideNext(ctx context.Context, st *disruptionState) error {
	if p := s.pending; p != nil {
		if st.now.Sub(p.at) < s.cfg.ConsolidationValidation {
			return nil // one command at a time: this one is judged again first
		}
		s.pending = nil
		cmd, why := s.revalidate(ctx, st, p.cmd)
		if why != "" {
			s.rt.Log.Info().Ctx(ctx).Strs("nodeclaims", cmd.claimNames()).Str("reason", string(p.cmd.reason)).Str("why", why).
				Msg("not disrupting: the command is no longer valid")
			s.metrics.invalidated.WithLabelValues(string(p.cmd.reason)).Inc()
			s.metrics.karp.failedValidations.WithLabelValues(consolidationType(p.cmd.reason, len(p.cmd.old))).Inc()
			return nil
		}
		return s.execute(ctx, st, cmd)
	}
	cmd, ok, err := s.compute(ctx, st)
	if err != nil || !ok {
		return err
	}
	if cmd.reason == karpv1.DisruptionReasonDrifted || s.cfg.ConsolidationValidation <= 0 {
		return s.execute(ctx, st, cmd)
	}
	s.pending = &pendingCommand{cmd: cmd, at: st.now}
	s.rt.Log.Info().Ctx(ctx).Strs("nodeclaims", cmd.claimNames()).Str("reason", string(cmd.reason)).Str("action", string(cmd.action)).
		Dur("in", s.cfg.ConsolidationValidation).Msg("validating a disruption before acting on it")
	return nil
}

// pendingCommand is a command computed and waiting to be validated again.
type pendingCommand struct {
	cmd command
	at  time.Time
}

// movablePods are the pods a disruption of the node would evict and reschedule.
func (s *scheduler) movablePods(node string) []*corev1.Pod {
	return disruption.Movable(s.cluster.PodsOn(node))
}

func claimPool(nc *karpv1.NodeClaim) string { return clusterstate.PoolOf(nc.Labels) }

// minSavings is the pool's replacement threshold: its annotation, else the setting. An
// annotation that does not parse is reported (once per value) and the setting used.
func (s *scheduler) minSavings(p clusterstate.Pool) float64 {
	v, ok := p.Annotations[minSavingsAnnotation]
	if !ok {
		return s.cfg.MinSavings
	}
	f, err := parsePercent(v)
	if err != nil {
		s.once("minsavings/"+p.Name+"/"+v, func() {
			s.rt.Log.Warn().Str("nodepool", p.Name).Str("value", v).Err(err).Msgf("ignoring %s; using --consolidation-min-savings", minSavingsAnnotation)
			s.recorder.Eventf(p.NodePool, corev1.EventTypeWarning, "InvalidAnnotation", "%s %q: %v; using the default %s",
				minSavingsAnnotation, v, err, formatPercent(s.cfg.MinSavings))
		})
		return s.cfg.MinSavings
	}
	return f
}

// parsePercent reads "10%" (or "12.5%") as 0.10.
func parsePercent(v string) (float64, error) {
	num, ok := strings.CutSuffix(strings.TrimSpace(v), "%")
	if !ok {
		return 0, fmt.Errorf("want a percentage such as \"10%%\"")
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f >= 100 {
		return 0, fmt.Errorf("want a percentage from 0%% to below 100%%")
	}
	return f / 100, nil
}

func formatPercent(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) + "%" }

// offeringPrice is what the node's offering costs per hour.
func offeringPrice(v view, typ, capacityType, zone string) (float64, bool) {
	t, ok := v.byName[typ]
	if !ok {
		return 0, false
	}
	for _, o := range t.Offerings {
		if o.CapacityType == capacityType && o.Zone == zone {
			return o.PriceUSDPerHour, true
		}
	}
	return 0, false
}

// coreCandidate is a consolidation candidate as the core takes it, or why it cannot be one.
func coreCandidate(st *disruptionState, c disruption.Candidate) (scheduling.Candidate, string) {
	node := c.Node
	out := scheduling.Candidate{Node: node.Name, NodePool: c.PoolName(), InstanceType: node.Labels[scheduling.LabelInstanceType],
		CapacityType: node.Labels[scheduling.LabelCapacityType], Zone: node.Labels[scheduling.LabelZone], LifetimeRemaining: 1}
	price, ok := offeringPrice(st.v, out.InstanceType, out.CapacityType, out.Zone)
	if !ok || (out.CapacityType != scheduling.CapacityTypeSpot && out.CapacityType != scheduling.CapacityTypeOnDemand) {
		return out, fmt.Sprintf("no price known for %s %s in %s", out.CapacityType, out.InstanceType, out.Zone)
	}
	out.PriceUSDPerHour = price
	if ea := c.Claim.Spec.ExpireAfter.Duration; ea != nil && *ea > 0 {
		left := c.Claim.CreationTimestamp.Add(*ea).Sub(st.now)
		// An expired node goes anyway; until it does it is the cheapest to disrupt.
		out.LifetimeRemaining = math.Max(0.001, math.Min(1, float64(left)/float64(*ea)))
	}
	return out, ""
}

// withDeletionCosts fills in each pod's controller.kubernetes.io/pod-deletion-cost on the
// candidates' nodes, which the core weighs in the disruption cost.
func (s *scheduler) withDeletionCosts(nodes []scheduling.Node, cands []scheduling.Candidate) []scheduling.Node {
	want := map[string]bool{}
	for _, c := range cands {
		want[c.Node] = true
	}
	out := make([]scheduling.Node, len(nodes))
	copy(out, nodes)
	for i := range out {
		if !want[out[i].Name] {
			continue
		}
		costs := map[string]int32{}
		for _, p := range s.cluster.PodsOn(out[i].Name) {
			if v, ok := p.Annotations["controller.kubernetes.io/pod-deletion-cost"]; ok {
				if n, err := strconv.ParseInt(v, 10, 32); err == nil {
					costs[string(p.UID)] = int32(n)
				}
			}
		}
		if len(costs) == 0 {
			continue
		}
		pods := append([]scheduling.Pod(nil), out[i].Pods...)
		for j := range pods {
			pods[j].DeletionCost = costs[pods[j].UID]
		}
		out[i].Pods = pods
	}
	return out
}

// without splits the pass's nodes into the claim's movable pods and every other node: what a
// solve of the cluster without the claim's node starts from.
func (s *scheduler) without(st *disruptionState, claims ...*karpv1.NodeClaim) (pods []scheduling.Pod, others []scheduling.Node) {
	gone := map[string]bool{}
	movable := map[string]bool{}
	for _, nc := range claims {
		name := nc.Status.NodeName
		if name == "" {
			name = nc.Name // in flight: the node is the claim
		}
		gone[name] = true
		for _, p := range s.movablePods(name) {
			movable[string(p.UID)] = true
		}
	}
	others = make([]scheduling.Node, 0, len(st.nodes))
	for _, n := range st.nodes {
		if !gone[n.Name] {
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

// uninitializedDestination names a node among the placements that is not initialized yet — a
// claim in flight, or a registered node whose claim is not Initialized — if any. A disruption
// does not move pods there, as Karpenter's does not ("would schedule against an uninitialized
// node"): that capacity may never come (a startup taint never lifted, a node that never gets
// Ready), and the pods would be evicted into nothing. The disruption waits instead.
func uninitializedDestination(st *disruptionState, placements []scheduling.Placement) (string, bool) {
	for _, p := range placements {
		if nc, ok := st.byNode[p.Node]; ok {
			if !nc.IsTrue(karpv1.ConditionTypeInitialized) {
				return "node " + p.Node + " (nodeclaim/" + nc.Name + ")", true
			}
			continue
		}
		if nc, ok := st.claims[p.Node]; ok && nc.Status.NodeName == "" {
			return "nodeclaim/" + nc.Name + " (in flight)", true
		}
	}
	return "", false
}
