// Package v1alpha5 is Karpenter's older karpenter.sh/v1alpha5 API, Provisioner, as the
// getting-started guides of Karpenter v0.2x wrote it. Fleetwright serves it so those manifests
// still apply, and reads it through package translate, which turns each Provisioner into a v1
// NodePool; nothing else works on this type.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1alpha5
