package main

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

// This file converts pods into the scheduling core's Pod. Every pod goes through the same
// projection (podproj.Project, the one pod-watcher publishes), so a pod from a batch, a pod
// bound to a node and a DaemonSet's pod (clusterstate.DaemonSetPod) are read alike.

// corePod converts a pod projection into the core's Pod.
func corePod(p *podsv1.PodProjection) scheduling.Pod {
	out := scheduling.Pod{
		UID:          p.GetUid(),
		Namespace:    p.GetNamespace(),
		Name:         p.GetName(),
		Labels:       p.GetLabels(),
		Priority:     p.GetPriority(),
		Requests:     scheduling.ResourceList{},
		NodeSelector: p.GetNodeSelector(),
	}
	if t := p.GetCreationTime(); t != nil {
		out.CreationTime = t.AsTime()
	}
	if o := p.GetOwner(); o != nil {
		out.Owner = scheduling.OwnerReference{Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUid()}
	}
	for n, q := range p.GetRequests().GetQuantities() {
		out.Requests[n] = q
	}
	for _, t := range p.GetRequiredNodeAffinity() {
		out.RequiredNodeAffinity = append(out.RequiredNodeAffinity, nodeSelectorTerm(t))
	}
	for _, t := range p.GetPreferredNodeAffinity() {
		out.PreferredNodeAffinity = append(out.PreferredNodeAffinity,
			scheduling.PreferredNodeSelectorTerm{Weight: t.GetWeight(), Term: nodeSelectorTerm(t.GetPreference())})
	}
	out.PodAffinity = podAffinity(p.GetPodAffinity())
	out.PodAntiAffinity = podAffinity(p.GetPodAntiAffinity())
	for _, t := range p.GetTolerations() {
		out.Tolerations = append(out.Tolerations, scheduling.Toleration{Key: t.GetKey(), Operator: t.GetOperator(), Value: t.GetValue(), Effect: t.GetEffect()})
	}
	for _, c := range p.GetTopologySpreadConstraints() {
		out.TopologySpread = append(out.TopologySpread, scheduling.TopologySpreadConstraint{
			MaxSkew: c.GetMaxSkew(), TopologyKey: c.GetTopologyKey(), WhenUnsatisfiable: c.GetWhenUnsatisfiable(),
			LabelSelector: labelSelector(c.GetLabelSelector()), MinDomains: c.GetMinDomains(),
		})
	}
	for _, hp := range p.GetHostPorts() {
		out.HostPorts = append(out.HostPorts, scheduling.HostPort{Port: hp.GetPort(), Protocol: hp.GetProtocol(), HostIP: hp.GetHostIp()})
	}
	for _, v := range p.GetVolumeRequirements() {
		out.VolumeRequirements = append(out.VolumeRequirements, requirements(v.GetRequirements())...)
	}
	return out
}

func nodeSelectorTerm(t *commonv1.NodeSelectorTerm) scheduling.NodeSelectorTerm {
	return scheduling.NodeSelectorTerm{Requirements: requirements(t.GetMatchExpressions())}
}

func requirements(rs []*commonv1.NodeSelectorRequirement) []scheduling.Requirement {
	out := make([]scheduling.Requirement, 0, len(rs))
	for _, r := range rs {
		out = append(out, scheduling.Requirement{Key: r.GetKey(), Operator: scheduling.Operator(r.GetOperator()),
			Values: r.GetValues(), MinValues: int(r.GetMinValues())})
	}
	return out
}

func podAffinity(a *podsv1.PodAffinity) scheduling.PodAffinityRules {
	var out scheduling.PodAffinityRules
	for _, t := range a.GetRequired() {
		out.Required = append(out.Required, podAffinityTerm(t))
	}
	for _, t := range a.GetPreferred() {
		out.Preferred = append(out.Preferred, scheduling.WeightedPodAffinityTerm{Weight: t.GetWeight(), Term: podAffinityTerm(t.GetTerm())})
	}
	return out
}

func podAffinityTerm(t *podsv1.PodAffinityTerm) scheduling.PodAffinityTerm {
	return scheduling.PodAffinityTerm{LabelSelector: labelSelector(t.GetLabelSelector()),
		Namespaces: t.GetNamespaces(), TopologyKey: t.GetTopologyKey()}
}

func labelSelector(s *commonv1.LabelSelector) *scheduling.LabelSelector {
	if s == nil {
		return nil
	}
	out := &scheduling.LabelSelector{MatchLabels: s.GetMatchLabels()}
	for _, e := range s.GetMatchExpressions() {
		out.MatchExpressions = append(out.MatchExpressions,
			scheduling.Requirement{Key: e.GetKey(), Operator: scheduling.Operator(e.GetOperator()), Values: e.GetValues()})
	}
	return out
}

// nominatedPod is a pending pod whose nomination holds room on a node or claim: it takes that
// room, but kube-scheduler has not placed it (scheduling.Pod.Nominated).
func nominatedPod(p *corev1.Pod, volumes podproj.Listers) scheduling.Pod {
	out := corePod(podproj.Project(p, volumes))
	out.Nominated = true
	return out
}
