package clusterstate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// ClaimRef refers to a NodeClaim, for an event about it (kubectl describe nodeclaim).
func ClaimRef(name, uid string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: name, UID: types.UID(uid)}
}

// PoolRef refers to a NodePool, for an event about it.
func PoolRef(name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool", Name: name, UID: uid}
}

// NodeRef refers to a Node, for an event about it; a node's events carry its name as UID, as the
// kubelet's do.
func NodeRef(name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name, UID: types.UID(name)}
}
