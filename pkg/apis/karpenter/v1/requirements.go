package v1

import (
	corev1 "k8s.io/api/core/v1"
)

// Operators beyond Kubernetes' own: Karpenter's inclusive bounds.
const (
	NodeSelectorOpGte corev1.NodeSelectorOperator = "Gte"
	NodeSelectorOpLte corev1.NodeSelectorOperator = "Lte"
)

// NodeSelectorRequirementWithMinValues is a node selector requirement on one label key, as in
// Kubernetes' node affinity, that can also ask for a minimum number of distinct values (of an
// In requirement) among the instance types a NodeClaim may become.
type NodeSelectorRequirementWithMinValues struct {
	// Key is the label key the requirement applies to.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^(([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*)/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`
	// +kubebuilder:validation:XValidation:message="label domain \"kubernetes.io\" is restricted",rule="self in ['beta.kubernetes.io/instance-type', 'failure-domain.beta.kubernetes.io/region', 'beta.kubernetes.io/os', 'beta.kubernetes.io/arch', 'failure-domain.beta.kubernetes.io/zone', 'topology.kubernetes.io/zone', 'topology.kubernetes.io/region', 'node.kubernetes.io/instance-type', 'kubernetes.io/arch', 'kubernetes.io/os', 'node.kubernetes.io/windows-build'] || self.find('^([^/]+)').endsWith('node.kubernetes.io') || self.find('^([^/]+)').endsWith('node-restriction.kubernetes.io') || !self.find('^([^/]+)').endsWith('kubernetes.io')"
	// +kubebuilder:validation:XValidation:message="label domain \"k8s.io\" is restricted",rule="self.find('^([^/]+)').endsWith('kops.k8s.io') || !self.find('^([^/]+)').endsWith('k8s.io')"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self in ['karpenter.sh/capacity-type'] || !self.find('^([^/]+)').endsWith('karpenter.sh')"
	// +required
	Key string `json:"key"`
	// Operator relates the key to the values.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist;Gt;Lt;Gte;Lte
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`
	// Values of the key: one or more for In and NotIn, exactly one integer for Gt, Lt, Gte and
	// Lte, none for Exists and DoesNotExist.
	// +kubebuilder:validation:MaxItems=500
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
	// MinValues is the least number of distinct values of the key the NodeClaim's instance
	// types must span (for flexibility, e.g. across instance families).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// NodeSelectorRequirement is the requirement without minValues, as Kubernetes writes it.
func (r NodeSelectorRequirementWithMinValues) NodeSelectorRequirement() corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: append([]string(nil), r.Values...)}
}

// NodeClassReference names the provider-specific node class (for Fleetwright, an EC2NodeClass
// in karpenter.k8s.aws) that says how to launch the NodeClaim's instance.
// +kubebuilder:validation:XValidation:message="nodeClassRef must refer to an EC2NodeClass in group karpenter.k8s.aws",rule="self.group == 'karpenter.k8s.aws' && self.kind == 'EC2NodeClass'"
// +kubebuilder:validation:XValidation:message="nodeClassRef.group is immutable",rule="self.group == oldSelf.group"
// +kubebuilder:validation:XValidation:message="nodeClassRef.kind is immutable",rule="self.kind == oldSelf.kind"
type NodeClassReference struct {
	// Group of the node class: karpenter.k8s.aws.
	// +kubebuilder:validation:XValidation:message="group may not be empty",rule="self != ''"
	// +kubebuilder:validation:Pattern=`^[^/]*$`
	// +kubebuilder:validation:MaxLength=253
	// +required
	Group string `json:"group"`
	// Kind of the node class: EC2NodeClass.
	// +kubebuilder:validation:XValidation:message="kind may not be empty",rule="self != ''"
	// +kubebuilder:validation:Pattern=`^[^/]*$`
	// +kubebuilder:validation:MaxLength=63
	// +required
	Kind string `json:"kind"`
	// Name of the node class.
	// +kubebuilder:validation:XValidation:message="name may not be empty",rule="self != ''"
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}
