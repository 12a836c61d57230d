// Package v1alpha1 is Karpenter's older AWS API, karpenter.k8s.aws/v1alpha1 AWSNodeTemplate,
// as Karpenter v0.2x wrote it: subnets, security groups and AMIs chosen by selector maps, plus
// the AWS launch settings. Fleetwright serves it so those manifests still apply, and reads it
// through package translate, which turns each AWSNodeTemplate into a v1 EC2NodeClass.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.k8s.aws
package v1alpha1
