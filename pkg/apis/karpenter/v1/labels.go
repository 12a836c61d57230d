package v1

import (
	corev1 "k8s.io/api/core/v1"
)

// Labels Karpenter puts on NodeClaims and Nodes, and that pods select on.
const (
	// NodePoolLabelKey names the NodePool a NodeClaim or Node belongs to.
	NodePoolLabelKey = Group + "/nodepool"
	// CapacityTypeLabelKey is spot, on-demand or reserved.
	CapacityTypeLabelKey = Group + "/capacity-type"
	// NodeRegisteredLabelKey is "true" once the Node registered for its NodeClaim.
	NodeRegisteredLabelKey = Group + "/registered"
	// NodeInitializedLabelKey is "true" once the Node is ready, its startup taints are gone
	// and its extended resources are advertised.
	NodeInitializedLabelKey = Group + "/initialized"
	// NodeDoNotSyncTaintsLabelKey stops Karpenter syncing taints from the NodeClaim to the Node.
	NodeDoNotSyncTaintsLabelKey = Group + "/do-not-sync-taints"
)

// Capacity types, the values of CapacityTypeLabelKey.
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"
)

// Well-known Kubernetes labels that NodePool requirements and pods' node selectors use.
const (
	LabelInstanceType   = corev1.LabelInstanceTypeStable // node.kubernetes.io/instance-type
	LabelTopologyZone   = corev1.LabelTopologyZone       // topology.kubernetes.io/zone
	LabelTopologyRegion = corev1.LabelTopologyRegion     // topology.kubernetes.io/region
	LabelArch           = corev1.LabelArchStable         // kubernetes.io/arch
	LabelOS             = corev1.LabelOSStable           // kubernetes.io/os
	LabelHostname       = corev1.LabelHostname           // kubernetes.io/hostname
	LabelWindowsBuild   = corev1.LabelWindowsBuild       // node.kubernetes.io/windows-build
)

// Annotations.
const (
	// DoNotDisruptAnnotationKey ("true") on a pod or Node keeps the Node from being disrupted
	// voluntarily (consolidation, drift, expiry before terminationGracePeriod).
	DoNotDisruptAnnotationKey = Group + "/do-not-disrupt"
	// NodePoolHashAnnotationKey records the hash of the NodePool template a NodeClaim was made
	// from, for drift detection.
	NodePoolHashAnnotationKey = Group + "/nodepool-hash"
	// NodePoolHashVersionAnnotationKey is the version of the hashing scheme.
	NodePoolHashVersionAnnotationKey = Group + "/nodepool-hash-version"
	// NodeClaimTerminationTimestampAnnotationKey is when a deleting NodeClaim's node must be
	// gone, terminationGracePeriod after deletion started.
	NodeClaimTerminationTimestampAnnotationKey = Group + "/nodeclaim-termination-timestamp"
)

// Taints.
const (
	// DisruptedTaintKey marks a Node being disrupted, so nothing new schedules to it.
	DisruptedTaintKey = Group + "/disrupted"
	// UnregisteredTaintKey is on a new Node until it is linked to its NodeClaim.
	UnregisteredTaintKey = Group + "/unregistered"
)

var (
	// DisruptedNoScheduleTaint is the taint put on a Node being disrupted.
	DisruptedNoScheduleTaint = corev1.Taint{Key: DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}
	// UnregisteredNoExecuteTaint is the startup taint a Node registers with.
	UnregisteredNoExecuteTaint = corev1.Taint{Key: UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}
)

// TerminationFinalizer holds a NodeClaim or Node until its instance is terminated and it is
// drained.
const TerminationFinalizer = Group + "/termination"

// WellKnownLabels are the label keys whose values come from the instance type and offering
// (rather than from the NodePool's labels); requirements on them choose instances.
var WellKnownLabels = []string{
	NodePoolLabelKey,
	CapacityTypeLabelKey,
	LabelInstanceType,
	LabelTopologyZone,
	LabelTopologyRegion,
	LabelArch,
	LabelOS,
	LabelWindowsBuild,
}

// RestrictedLabelDomains are label domains a NodePool may not set labels in, apart from the
// exceptions in LabelDomainExceptions and WellKnownLabels.
var RestrictedLabelDomains = []string{"kubernetes.io", "k8s.io", Group}

// LabelDomainExceptions are subdomains of restricted domains that NodePools may use.
var LabelDomainExceptions = []string{"kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io"}
