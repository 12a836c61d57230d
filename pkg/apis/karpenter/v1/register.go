package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group is the API group of NodePool and NodeClaim.
const Group = "karpenter.sh"

// SchemeGroupVersion is karpenter.sh/v1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

var (
	// SchemeBuilder registers this package's kinds.
	SchemeBuilder = (&scheme.Builder{GroupVersion: SchemeGroupVersion}).Register(&NodePool{}, &NodePoolList{}, &NodeClaim{}, &NodeClaimList{})
	// AddToScheme adds NodePool and NodeClaim (and their lists) to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
