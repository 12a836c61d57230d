package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of AWSNodeTemplate.
const Group = "karpenter.k8s.aws"

// SchemeGroupVersion is karpenter.k8s.aws/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

var (
	// SchemeBuilder registers this package's kinds.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds AWSNodeTemplate (and its list) to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &AWSNodeTemplate{}, &AWSNodeTemplateList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
