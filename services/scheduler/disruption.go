package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// This file is the leader's voluntary disruption: consolidation of underutilized nodes and the
// replacement of drifted ones. Empty nodes are the terminator's (emptiness), expired and
// interrupted ones too (forceful). A pass:
//
//	read the cluster ─ advance decisions in flight (replacement ready → terminate the old node;
//	                 │ replacement failed or too slow → abandon, nothing left tainted)
//	                 ├ consolidation: candidates (policy, consolidateAfter, do-not-disrupt, PDBs)
//	                 │   → budgets → scheduling.Consolidate → at most one command
//	                 └ drift: each pool's oldest drifted claim within its budget → re-solve its pods
//
// A decision is recorded on the old NodeClaims (disruption.DecisionAnnotation) before anything
// else happens, so it counts against budgets at once and survives a leader change; the
// replacements carry replacesAnnotation, so the terminator leaves them alone while they wait
// for the pods. Every decision and every block is logged, recorded as an event on the NodeClaim
// and its Node, traced, and published as a DisruptionDecision on <prefix>.terminations.decisions
// (announce.go) for the audit stream.

// replacesAnnotation on a replacement NodeClaim names the claims it replaces.
const replacesAnnotation = disruption.ReplacesAnnotation

// minSavingsAnnotation on a NodePool (or Provisioner) overrides --consolidation-min-savings for
// its nodes, as a percentage ("10%").
const minSavingsAnnotation = "fleetwright.io/consolidation-min-savings"

// podEvents remembers when a pod last arrived on or left each node: consolidateAfter counts
// from there (Karpenter's lastPodEventTime). It starts at the time the scheduler started, so a
// new leader waits a full consolidateAfter before it consolidates.
type podEvents struct {
	mu    sync.Mutex
	last  map[string]time.Time
	since time.Time
	now   func() time.Time
}

func newPodEvents(now func() time.Time) *podEvents {
	return &podEvents{last: map[string]time.Time{}, since: now(), now: now}
}

func (e *podEvents) touch(node string) {
	if node == "" {
		return
	}
	e.mu.Lock()
	e.last[node] = e.now()
	e.mu.Unlock()
}

// lastEvent is when a pod last arrived on or left the node (at least the start time).
func (e *podEvents) lastEvent(node string) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t, ok := e.last[node]; ok && t.After(e.since) {
		return t
	}
	return e.since
}

// forget drops nodes that are gone.
func (e *podEvents) forget(keep func(node string) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for n := range e.last {
		if !keep(n) {
			delete(e.last, n)
		}
	}
}

// handler keeps podEvents up to date from the pod informer.
func (e *podEvents) handler() cache.ResourceEventHandler {
	nodeOf := func(o any) (string, bool) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		p, ok := o.(*corev1.Pod)
		if !ok {
			return "", false
		}
		return p.Spec.NodeName, p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if n, _ := nodeOf(o); n != "" {
				e.touch(n)
			}
		},
		UpdateFunc: func(old, cur any) {
			on, odone := nodeOf(old)
			cn, cdone := nodeOf(cur)
			if on != cn || odone != cdone {
				e.touch(on)
				e.touch(cn)
			}
		},
		DeleteFunc: func(o any) {
			if n, _ := nodeOf(o); n != "" {
				e.touch(n)
			}
		},
	}
}

// disruptionState is one pass's read of the cluster for disruption.
type disruptionState struct {
	v      view
	now    time.Time
	pools  map[string]clusterstate.Pool
	claims map[string]*karpv1.NodeClaim // by name
	byNode map[string]*karpv1.NodeClaim // by node name
	nodes  []scheduling.Node            // every node and in-flight claim with its pods
	pdbs   []*policyv1.PodDisruptionBudget
	// counts of each pool's claims and of those disrupting, for budgets
	total, disrupting map[string]int
	// consolidatable: claims of consolidating pools, and whether each has been a candidate
	// (no pod arrived or left) for its pool's consolidateAfter.
	consolidatable map[string]bool
}

func (s *scheduler) readDisruption() (*disruptionState, error) {
	v, err := s.read()
	if err != nil {
		return nil, err
	}
	st := &disruptionState{v: v, now: s.now(), pools: map[string]clusterstate.Pool{}, claims: map[string]*karpv1.NodeClaim{},
		byNode: map[string]*karpv1.NodeClaim{}, total: map[string]int{}, disrupting: map[string]int{}, pdbs: s.cluster.AllPDBs(),
		consolidatable: map[string]bool{}}
	for _, p := range s.cluster.Pools() {
		st.pools[p.Name] = p
	}
	for _, nc := range s.cluster.Claims() {
		st.claims[nc.Name] = nc
		if nc.Status.NodeName != "" {
			st.byNode[nc.Status.NodeName] = nc
		}
		pool := claimPool(nc)
		st.total[pool]++
		var node *corev1.Node
		if nc.Status.NodeName != "" {
			node, _ = s.cluster.Node(nc.Status.NodeName)
		}
		if disruption.Disrupting(nc, node) {
			st.disrupting[pool]++
		}
	}
	st.nodes = s.nodes(v)
	// A replacement waiting for the pods of the nodes it replaces takes no others: its room is
	// promised to them.
	for i, n := range st.nodes {
		nc := st.claims[n.Name]
		if nc == nil {
			nc = st.byNode[n.Name]
		}
		if nc != nil && s.replacing(nc, st) {
			st.nodes[i].MarkedForDeletion = true
		}
	}
	return st, nil
}

func claimPool(nc *karpv1.NodeClaim) string { return nodePoolOf(nc.Labels) }

// allowance is how many more of the pool's nodes may be disrupted now for the reason.
func (st *disruptionState) allowance(pool string, reason karpv1.DisruptionReason) disruption.Allowance {
	p, ok := st.pools[pool]
	if !ok || p.Legacy {
		// v1alpha5 Provisioners have no budgets: nothing limits them (as Karpenter v1alpha5).
		return disruption.Allowance{Nodes: math.MaxInt32}
	}
	return disruption.Allowed(p.Spec.Disruption.Budgets, reason, st.now, st.total[pool], st.disrupting[pool])
}

// movablePods are the pods a disruption would evict and reschedule: not DaemonSet or mirror
// pods, not finished or already terminating.
func (s *scheduler) movablePods(node string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range s.cluster.PodsOn(node) {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || podproj.StaysWithNode(p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// blocker says in words why the node may not be disrupted voluntarily now: a
// karpenter.sh/do-not-disrupt node or pod, or a PodDisruptionBudget that allows no eviction of
// one of its pods. Empty when nothing blocks.
func blocker(node *corev1.Node, pods []*corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) (why, cause string) {
	if node != nil && node.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
		return fmt.Sprintf("node %s is annotated %s", node.Name, karpv1.DoNotDisruptAnnotationKey), "do-not-disrupt"
	}
	for _, p := range pods {
		if p.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
			return fmt.Sprintf("pod %s/%s is annotated %s", p.Namespace, p.Name, karpv1.DoNotDisruptAnnotationKey), "do-not-disrupt"
		}
	}
	for _, p := range pods {
		for _, b := range pdbs {
			if b.Namespace != p.Namespace || b.Status.DisruptionsAllowed > 0 {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			return fmt.Sprintf("PodDisruptionBudget %s/%s allows no disruption of pod %s/%s", b.Namespace, b.Name, p.Namespace, p.Name), "pdb"
		}
	}
	return "", ""
}

// consolidatable reports whether the pool consolidates underutilized nodes, and after how long.
func consolidatable(p clusterstate.Pool) (time.Duration, bool) {
	d := p.Spec.Disruption
	if d.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized || d.ConsolidateAfter.Duration == nil {
		return 0, false
	}
	return *d.ConsolidateAfter.Duration, true
}

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

// candidates finds the nodes consolidation may consider: launched, initialized, registered
// claims of pools that consolidate underutilized nodes, not disrupting, not a replacement still
// waiting for its pods, with movable pods, and no pod arrived or left for consolidateAfter. The
// ones a do-not-disrupt annotation or a PodDisruptionBudget holds back are returned as blocked.
func (s *scheduler) candidates(st *disruptionState) (cands []scheduling.Candidate, blocked []scheduling.Rejection, causes map[string]string) {
	causes = map[string]string{}
	kept := s.cfg.LaunchLoop.Keeps(st.v.histories, s.pendingPods())
	for _, name := range slices.Sorted(maps.Keys(st.claims)) {
		nc := st.claims[name]
		p, ok := st.pools[claimPool(nc)]
		if !ok || nc.Status.NodeName == "" || !nc.IsTrue(karpv1.ConditionTypeInitialized) || nc.DeletionTimestamp != nil ||
			nc.Annotations[disruption.DecisionAnnotation] != "" || s.replacing(nc, st) {
			continue
		}
		after, ok := consolidatable(p)
		if !ok {
			continue
		}
		st.consolidatable[nc.Name] = false
		node, ok := s.cluster.Node(nc.Status.NodeName)
		if !ok || disruption.Disrupting(nc, node) {
			continue
		}
		pods := s.movablePods(node.Name)
		if len(pods) == 0 {
			continue // empty: the terminator's emptiness takes it
		}
		since := s.podEvents.lastEvent(node.Name)
		if init := nc.Condition(karpv1.ConditionTypeInitialized); init != nil && init.LastTransitionTime.After(since) {
			since = init.LastTransitionTime.Time
		}
		if st.now.Sub(since) < after {
			continue
		}
		st.consolidatable[nc.Name] = true
		if why, ok := kept[nc.Name]; ok {
			blocked = append(blocked, scheduling.Rejection{Node: node.Name, Reason: "kept: " + why})
			causes[node.Name] = "launch-loop"
			continue
		}
		if why, cause := blocker(node, pods, st.pdbs); why != "" {
			blocked = append(blocked, scheduling.Rejection{Node: node.Name, Reason: why})
			causes[node.Name] = cause
			continue
		}
		c := scheduling.Candidate{Node: node.Name, NodePool: p.Name, InstanceType: node.Labels[scheduling.LabelInstanceType],
			CapacityType: node.Labels[scheduling.LabelCapacityType], Zone: node.Labels[scheduling.LabelZone], LifetimeRemaining: 1}
		c.PriceUSDPerHour, ok = offeringPrice(st.v, c.InstanceType, c.CapacityType, c.Zone)
		if c.CapacityType != scheduling.CapacityTypeSpot && c.CapacityType != scheduling.CapacityTypeOnDemand {
			ok = false
		}
		if !ok {
			blocked = append(blocked, scheduling.Rejection{Node: node.Name, Reason: fmt.Sprintf("no price known for %s %s in %s", c.CapacityType, c.InstanceType, c.Zone)})
			causes[node.Name] = "unpriced"
			continue
		}
		if ea := nc.Spec.ExpireAfter.Duration; ea != nil && *ea > 0 {
			left := nc.CreationTimestamp.Add(*ea).Sub(st.now)
			// An expired node is the terminator's; until it goes it is the cheapest to disrupt.
			c.LifetimeRemaining = math.Max(0.001, math.Min(1, float64(left)/float64(*ea)))
		}
		cands = append(cands, c)
	}
	return cands, blocked, causes
}

// replacing reports a replacement claim whose replaced claims are still there: it waits for
// their pods and is not itself a candidate.
func (s *scheduler) replacing(nc *karpv1.NodeClaim, st *disruptionState) bool {
	return disruption.Replacing(nc, func(name string) bool { _, ok := st.claims[name]; return ok })
}

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
