// Package v1 is Karpenter's AWS API, karpenter.k8s.aws/v1, as Fleetwright serves it:
// EC2NodeClass, which says how an instance is launched — which subnets, security groups and
// AMIs (found by selector terms), which IAM role or instance profile, user data, tags, block
// devices, instance metadata options and kubelet settings.
//
// The launcher resolves the selector terms and records what it found in the status. labels.go
// holds the karpenter.k8s.aws label keys that describe instance types.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.k8s.aws
package v1
