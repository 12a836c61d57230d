package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group is the API group of AWSNodeTemplate.
const Group = "karpenter.k8s.aws"

// SchemeGroupVersion is karpenter.k8s.aws/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

var (
	// SchemeBuilder registers this package's kinds.
	SchemeBuilder = (&scheme.Builder{GroupVersion: SchemeGroupVersion}).Register(&AWSNodeTemplate{}, &AWSNodeTemplateList{})
	// AddToScheme adds AWSNodeTemplate (and its list) to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
