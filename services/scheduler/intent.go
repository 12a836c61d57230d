package main

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetwright/fleetwright/pkg/offerings"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// intentSource is what a LaunchIntent is built from. It is read from the NodeClaim object, the
// durable record of the decision, so the intent published right after creating the claim and
// the one the reconcile loop republishes later are the same message.
type intentSource struct {
	claim       claimView
	pods        []*commonv1.PodRef
	types       map[string]*scheduling.InstanceType
	typeList    []scheduling.InstanceType // the same types, in the catalog's order
	zoneIDs     map[string]string
	maxTypes    int
	unavailable []scheduling.OfferingKey
	kubelet     *launchv1.KubeletConfig
	now         time.Time
}

// claimView is the part of a NodeClaim a LaunchIntent carries.
type claimView struct {
	Name, UID, NodePool string
	BatchID             string // the batch it was planned for (batchAnnotation)
	NodeClassRef        *commonv1.ObjectRef
	Requirements        []*commonv1.NodeSelectorRequirement
	Labels              map[string]string
	Taints              []corev1.Taint
	StartupTaints       []corev1.Taint
	Requests            corev1.ResourceList
}

// launchIntent builds the LaunchIntent of a NodeClaim: its instance types (the requirement's In
// list) with the offerings its zone and capacity-type requirements allow, minus unavailable
// ones, each type's offerings cheapest first and the types ordered by their cheapest offering.
// A claim made by hand, whose requirements do not list its types, zones and capacity types,
// launches as any type they and its requests allow (handMadeIntent).
func launchIntent(src intentSource) *launchv1.LaunchIntent {
	c := src.claim
	zones := requirementValues(c.Requirements, scheduling.LabelZone)
	capacityTypes := requirementValues(c.Requirements, scheduling.LabelCapacityType)
	if !offerings.Named(requirementValues(c.Requirements, scheduling.LabelInstanceType), zones, capacityTypes) {
		return handMadeIntent(src)
	}
	in := &launchv1.LaunchIntent{
		NodeClaimName: c.Name, NodeClaimUid: c.UID, NodePoolName: c.NodePool, NodeClassRef: c.NodeClassRef,
		Zones: zones, Requirements: c.Requirements, Labels: c.Labels,
		Taints: taints(c.Taints), StartupTaints: taints(c.StartupTaints),
		Resources: resources(c.Requests), Pods: src.pods, Kubelet: src.kubelet,
		CreateTime: timestamppb.New(src.now), BatchId: c.BatchID,
	}
	for _, ct := range capacityTypes {
		in.CapacityTypes = append(in.CapacityTypes, offerings.CapacityType(ct))
	}
	in.InstanceTypes = instanceTypeOptions(requirementValues(c.Requirements, scheduling.LabelInstanceType),
		src.types, zones, capacityTypes, src.unavailable)
	return in
}

// handMadeIntent is the LaunchIntent of a claim made by hand: the types, zones and capacity
// types its requirements and requests allow (offerings.HandMade, which the launcher launches
// with too), as Karpenter launches a NodeClaim of no NodePool.
func handMadeIntent(src intentSource) *launchv1.LaunchIntent {
	c := src.claim
	in := &launchv1.LaunchIntent{
		NodeClaimName: c.Name, NodeClaimUid: c.UID, NodePoolName: c.NodePool, NodeClassRef: c.NodeClassRef,
		Requirements: c.Requirements, Labels: c.Labels, Taints: taints(c.Taints), StartupTaints: taints(c.StartupTaints),
		Resources: resources(c.Requests), Pods: src.pods, Kubelet: src.kubelet,
		CreateTime: timestamppb.New(src.now), BatchId: c.BatchID,
	}
	opts, zones, capacityTypes, err := offerings.HandMade(requirements(c.Requirements), podproj.CoreResources(c.Requests),
		src.typeList, src.zoneIDs, src.unavailable, src.maxTypes)
	if err != nil {
		return in // no types: refused by the caller, with the claim named
	}
	in.InstanceTypes, in.Zones = opts, zones
	for _, ct := range capacityTypes {
		in.CapacityTypes = append(in.CapacityTypes, offerings.CapacityType(ct))
	}
	return in
}

// instanceTypeOptions is offerings.Options over the scheduler's catalog.
func instanceTypeOptions(names []string, types map[string]*scheduling.InstanceType, zones, capacityTypes []string,
	unavailable []scheduling.OfferingKey) []*launchv1.InstanceTypeOption {
	avoid := make(map[scheduling.OfferingKey]bool, len(unavailable))
	for _, k := range unavailable {
		avoid[k] = true
	}
	return offerings.Options(names, func(name string) ([]scheduling.Offering, bool) {
		t, ok := types[name]
		if !ok {
			return nil, false
		}
		return t.Offerings, true
	}, zones, capacityTypes, avoid)
}

// requirementValues returns the values of the key's In requirement.
func requirementValues(reqs []*commonv1.NodeSelectorRequirement, key string) []string {
	for _, r := range reqs {
		if r.GetKey() == key && r.GetOperator() == string(corev1.NodeSelectorOpIn) {
			return r.GetValues()
		}
	}
	return nil
}

func taints(ts []corev1.Taint) []*commonv1.Taint {
	out := make([]*commonv1.Taint, 0, len(ts))
	for _, t := range ts {
		out = append(out, &commonv1.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	return out
}

// resources converts Kubernetes quantities into the messages' units: cpu in millicores,
// everything else in base units.
func resources(rl corev1.ResourceList) *commonv1.Resources {
	out := &commonv1.Resources{Quantities: map[string]int64{}}
	for n, q := range rl {
		if n == corev1.ResourceCPU {
			out.Quantities[string(n)] = q.MilliValue()
		} else {
			out.Quantities[string(n)] = q.Value()
		}
	}
	return out
}
