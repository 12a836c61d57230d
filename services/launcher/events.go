package main

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// Event reasons the launcher records on NodeClaims and Nodes (kubectl describe, kubectl events).
const (
	reasonLaunched          = "Launched"
	reasonRegistered        = "Registered"
	reasonInitialized       = "Initialized"
	reasonInsufficientCap   = "InsufficientCapacityError"
	reasonNodeClassNotReady = "NodeClassNotReady"
	reasonFailedLaunch      = "FailedLaunch"
)

// claimObject refers to a NodeClaim for an event.
func claimObject(name, uid string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: name, UID: types.UID(uid)}
}

// nodeObject refers to a Node for an event (a node's events carry its name as UID, as the
// kubelet's do).
func nodeObject(name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name, UID: types.UID(name)}
}

// failureReason is the event reason of a launch that failed for good.
func failureReason(code string) string {
	switch code {
	case "InsufficientCapacity":
		return reasonInsufficientCap
	case "NodeClassNotFound", "NodeClassInvalid":
		return reasonNodeClassNotReady
	}
	return reasonFailedLaunch
}
