package v1alpha5

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group is the API group of Provisioner.
const Group = "karpenter.sh"

// SchemeGroupVersion is karpenter.sh/v1alpha5.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha5"}

var (
	// SchemeBuilder registers this package's kinds.
	SchemeBuilder = (&scheme.Builder{GroupVersion: SchemeGroupVersion}).Register(&Provisioner{}, &ProvisionerList{})
	// AddToScheme adds Provisioner (and its list) to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// ProvisionerNameLabelKey names the Provisioner a v1alpha5 node belongs to. Nodes launched for
// a translated Provisioner carry it, as well as karpenter.sh/nodepool.
const ProvisionerNameLabelKey = Group + "/provisioner-name"

// DoNotEvictPodAnnotationKey is v1alpha5's karpenter.sh/do-not-disrupt on pods.
const DoNotEvictPodAnnotationKey = Group + "/do-not-evict"

// DoNotConsolidateNodeAnnotationKey is v1alpha5's karpenter.sh/do-not-disrupt on nodes.
const DoNotConsolidateNodeAnnotationKey = Group + "/do-not-consolidate"
