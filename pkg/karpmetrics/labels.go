package karpmetrics

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// Karpenter's label names.
const (
	LabelNodePool          = "nodepool"
	LabelReason            = "reason"
	LabelResourceType      = "resource_type"
	LabelCapacityType      = "capacity_type"
	LabelZone              = "zone"
	LabelMinValuesRelaxed  = "min_values_relaxed"
	LabelDecision          = "decision"
	LabelConsolidationType = "consolidation_type"
	LabelController        = "controller"
	LabelMethod            = "method"
	LabelProvider          = "provider"
	LabelError             = "error"
	LabelMessageType       = "message_type"
	LabelResult            = "result"
	LabelCode              = "code"
	LabelInstanceType      = "instance_type"
	LabelName              = "name"
	LabelNamespace         = "namespace"
)

// nodeLabelKeys are the node labels karpenter_nodes_* carry one metric label each for: core
// Karpenter's v1.WellKnownLabels with those the AWS provider adds to it (v1.14.1). They are
// listed here rather than taken from karpv1/ec2v1.WellKnownLabels because they are a fact of
// Karpenter's metrics, not our requirements: ec2v1's list has ec2nodeclass, which Karpenter's
// has not, and lacks the capacity-reservation, tenancy, placement-group and capability-flex
// keys, which it has; a dashboard's label_values() must find exactly Karpenter's names.
var nodeLabelKeys = []string{
	karpv1.NodePoolLabelKey, karpv1.LabelTopologyZone, karpv1.LabelTopologyRegion, karpv1.LabelInstanceType,
	karpv1.LabelArch, karpv1.LabelOS, karpv1.CapacityTypeLabelKey, karpv1.LabelWindowsBuild,
	ec2v1.Group + "/capacity-reservation-id", ec2v1.Group + "/capacity-reservation-type",
	ec2v1.Group + "/capacity-reservation-interruptible", ec2v1.LabelInstanceHypervisor,
	ec2v1.LabelInstanceEncryptionInTransit, ec2v1.LabelInstanceCategory, ec2v1.Group + "/instance-capability-flex",
	ec2v1.LabelInstanceFamily, ec2v1.LabelInstanceGeneration, ec2v1.LabelInstanceSize, ec2v1.LabelInstanceLocalNVME,
	ec2v1.LabelInstanceCPU, ec2v1.LabelInstanceCPUManufacturer, ec2v1.LabelInstanceCPUSustainedClockSpeed,
	ec2v1.LabelInstanceMemory, ec2v1.LabelInstanceEBSBandwidth, ec2v1.LabelInstanceNetworkBandwidth,
	ec2v1.LabelInstanceGPUName, ec2v1.LabelInstanceGPUManufacturer, ec2v1.LabelInstanceGPUCount,
	ec2v1.LabelInstanceGPUMemory, ec2v1.LabelInstanceAcceleratorName, ec2v1.LabelInstanceAcceleratorManufacturer,
	ec2v1.LabelInstanceAcceleratorCount, ec2v1.LabelTopologyZoneID, ec2v1.Group + "/instance-tenancy",
	ec2v1.Group + "/placement-group-id", ec2v1.Group + "/placement-group-partition",
}

// metricLabelName is Karpenter's metric label name for a node label key: the part after the
// slash, lower case, dashes as underscores (kubernetes.io/arch → arch,
// karpenter.k8s.aws/instance-cpu → instance_cpu).
func metricLabelName(key string) string {
	_, name, _ := strings.Cut(key, "/")
	return strings.ReplaceAll(strings.ToLower(name), "-", "_")
}

// NodeLabelNames are the label names of karpenter_nodes_* (without resource_type), sorted.
func NodeLabelNames() []string {
	names := map[string]bool{"node_name": true, "phase": true, "managed": true}
	for _, key := range nodeLabelKeys {
		names[metricLabelName(key)] = true
	}
	return slices.Sorted(maps.Keys(names))
}

// PodLabelNames are karpenter_pods_state's label names.
var PodLabelNames = []string{LabelName, LabelNamespace, "owner", "node", "scheduled", LabelNodePool, LabelZone, "arch",
	LabelCapacityType, LabelInstanceType, "phase", "ready", "managed"}

// value is a quantity as Karpenter reports it: cores for cpu, the plain value for the rest.
func value(name corev1.ResourceName, q resource.Quantity) float64 {
	if name == corev1.ResourceCPU {
		return float64(q.MilliValue()) / 1000
	}
	return float64(q.Value())
}

// resourceType is Karpenter's resource_type value: lower case, dashes as underscores.
func resourceType(name corev1.ResourceName) string {
	return strings.ReplaceAll(strings.ToLower(string(name)), "-", "_")
}

// LowerReason is the reason label of Karpenter's disruption metrics: a disruption reason in
// lower case ("Underutilized" → "underutilized"); one word each, so Karpenter's snake case of
// nodeclaims_disrupted_total gives the same.
func LowerReason(r karpv1.DisruptionReason) string { return strings.ToLower(string(r)) }
