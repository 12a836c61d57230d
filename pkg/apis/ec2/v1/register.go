package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group is the API group of EC2NodeClass.
const Group = "karpenter.k8s.aws"

// SchemeGroupVersion is karpenter.k8s.aws/v1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

var (
	// SchemeBuilder registers this package's kinds.
	SchemeBuilder = (&scheme.Builder{GroupVersion: SchemeGroupVersion}).Register(&EC2NodeClass{}, &EC2NodeClassList{})
	// AddToScheme adds EC2NodeClass (and its list) to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
