package main

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	schedulerv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/scheduler/v1"
)

// simulate answers "if these nodes went away, where would their pods go, and what would
// replace them?" against the current cluster state. Nothing is created.
func (s *scheduler) simulate(ctx context.Context, req *schedulerv1.SimulateRequest) (*schedulerv1.SimulateResponse, error) {
	_, span := tracer.Start(ctx, "scheduler.simulate")
	defer span.End()
	resp, err := s.simulatePlan(req)
	if err != nil {
		s.metrics.simulations.WithLabelValues("error").Inc()
		span.RecordError(err)
		return nil, err
	}
	s.metrics.simulations.WithLabelValues("ok").Inc()
	span.SetAttributes(attribute.StringSlice("fleetwright.nodes", req.GetNodeNames()), attribute.Int("fleetwright.claims", len(resp.GetNewNodeClaims())),
		attribute.Float64("fleetwright.cost_delta_usd_per_hour", resp.GetCostDeltaUsdPerHour()))
	return resp, nil
}

func (s *scheduler) simulatePlan(req *schedulerv1.SimulateRequest) (*schedulerv1.SimulateResponse, error) {
	v, err := s.read()
	if err != nil {
		return nil, fmt.Errorf("reading cluster state: %w", err)
	}
	removed := set(req.GetNodeNames())
	var pods []scheduling.Pod
	resp := &schedulerv1.SimulateResponse{}
	found := map[string]bool{}
	for _, n := range v.nodes {
		if !removed[n.Name] {
			continue
		}
		found[n.Name] = true
		resp.RemovedCostUsdPerHour += nodePrice(n.Labels, v.byName)
		for _, p := range s.cluster.podsOn(n.Name) {
			if reschedulable(p) {
				pods = append(pods, corePod(podproj.Project(p, s.cluster.volumes)))
			}
		}
	}
	for _, c := range v.claims {
		if removed[c.Name] && !found[c.Name] {
			found[c.Name] = true
			for _, p := range s.liveNominations(c.Name) {
				pods = append(pods, corePod(podproj.Project(p, s.cluster.volumes)))
			}
		}
	}
	for _, name := range req.GetNodeNames() {
		if !found[name] {
			return nil, fmt.Errorf("simulating: node %q not found", name)
		}
	}
	for _, p := range req.GetExtraPods() {
		pods = append(pods, corePod(p))
	}
	byUID := make(map[string]scheduling.Pod, len(pods))
	for _, p := range pods {
		byUID[p.UID] = p
	}

	in := s.input(v, s.nodes(v), pods)
	kept := in.Nodes[:0]
	for _, n := range in.Nodes {
		if !removed[n.Name] {
			kept = append(kept, n)
		}
	}
	in.Nodes = kept
	if allowed := set(req.GetNodePoolNames()); len(allowed) > 0 {
		pools := in.NodePools[:0]
		for _, p := range in.NodePools {
			if allowed[p.Name] {
				pools = append(pools, p)
			}
		}
		in.NodePools = pools
	}
	plan, err := scheduling.Solve(in)
	if err != nil {
		return nil, fmt.Errorf("solving: %w", err)
	}
	return simulateResponse(resp, plan, byUID, v, in.Unavailable), nil
}

func simulateResponse(resp *schedulerv1.SimulateResponse, plan scheduling.Plan, pods map[string]scheduling.Pod, v view,
	unavailable []scheduling.OfferingKey) *schedulerv1.SimulateResponse {
	ref := func(uid string) *commonv1.PodRef { return podRef(pods[uid]) }
	for _, p := range plan.Placements {
		resp.Placements = append(resp.Placements, &schedulerv1.Placement{Pod: ref(p.PodUID),
			Target: &schedulerv1.Placement_NodeName{NodeName: p.Node}})
	}
	for _, c := range plan.NodeClaims {
		sc := &schedulerv1.SimulatedNodeClaim{Name: c.Name, NodePoolName: c.NodePool,
			Requirements: requirementMessages(claimRequirements(c)), Resources: &commonv1.Resources{Quantities: c.Requests}}
		sc.InstanceTypes = instanceTypeOptions(c.InstanceTypes, v.byName, set(c.Zones), set(c.CapacityTypes), unavailable)
		for _, uid := range c.PodUIDs {
			sc.Pods = append(sc.Pods, ref(uid))
			resp.Placements = append(resp.Placements, &schedulerv1.Placement{Pod: ref(uid),
				Target: &schedulerv1.Placement_NewNodeClaimName{NewNodeClaimName: c.Name}})
		}
		resp.NewNodeClaims = append(resp.NewNodeClaims, sc)
	}
	for _, u := range plan.Unschedulable {
		reason := u.Reason
		if len(v.pools) == 0 {
			reason = noNodePool
		}
		resp.UnplaceablePods = append(resp.UnplaceablePods, &schedulerv1.UnplaceablePod{Pod: ref(u.PodUID), Reason: reason})
	}
	resp.AllPodsFit = len(plan.Unschedulable) == 0
	resp.AddedCostUsdPerHour = plan.CostUSDPerHour()
	resp.CostDeltaUsdPerHour = resp.AddedCostUsdPerHour - resp.RemovedCostUsdPerHour
	return resp
}

// reschedulable reports pods that would move if their node went away: not DaemonSet or mirror
// pods, not finished.
func reschedulable(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	return !podproj.StaysWithNode(p)
}

// nodePrice is what a node costs an hour, by its instance type, zone and capacity type labels;
// 0 when the catalog does not know it.
func nodePrice(labels map[string]string, types map[string]*scheduling.InstanceType) float64 {
	t, ok := types[labels[scheduling.LabelInstanceType]]
	if !ok {
		return 0
	}
	ct := labels[scheduling.LabelCapacityType]
	if ct == "" {
		ct = scheduling.CapacityTypeOnDemand
	}
	for _, o := range t.Offerings {
		if o.Zone == labels[scheduling.LabelZone] && o.CapacityType == ct {
			return o.PriceUSDPerHour
		}
	}
	return 0
}

func requirementMessages(reqs []scheduling.Requirement) []*commonv1.NodeSelectorRequirement {
	out := make([]*commonv1.NodeSelectorRequirement, 0, len(reqs))
	for _, r := range reqs {
		m := &commonv1.NodeSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values}
		if r.MinValues > 0 {
			mv := int32(r.MinValues)
			m.MinValues = &mv
		}
		out = append(out, m)
	}
	return out
}
