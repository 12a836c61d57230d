// Package v1 is Karpenter's karpenter.sh/v1 API as Fleetwright serves it: NodePool (what may be
// launched, with which labels, taints, limits and disruption rules) and NodeClaim (one launched
// or launching node, the durable record of a scheduling decision).
//
// The types are wire-compatible with Karpenter's, so manifests written for Karpenter apply
// unchanged. The CRDs in deploy/crds are generated from the markers in this package by
// controller-gen; labels.go holds the label, annotation, taint and finalizer keys that
// Karpenter's users and tools rely on.
//
// Labels and taints reach the kubelet's command line, so their rules (qualified-name keys,
// label-value values, the three taint effects) are CEL rules here; corev1.Taint's strings and
// the label maps' values get their maximum lengths from tools/crdpatch (markers cannot reach
// them), without which the apiserver estimates the rules too costly and refuses the CRD.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1
