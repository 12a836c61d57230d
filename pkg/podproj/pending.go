// Package podproj turns Kubernetes pods into the scheduling projection Fleetwright's services
// exchange (fleetwright.pods.v1.PodProjection), and decides which pods are pending.
//
//	corev1.Pod ──Pending?──> yes ──Project──> PodProjection (requests as kube-scheduler sums them,
//	                                          constraints copied, volume zones resolved)
//
// A pod is pending, as Karpenter counts it, when kube-scheduler has marked it
// PodScheduled=False/Unschedulable and it is not bound, not terminal, not being deleted, not
// preempting, and not owned by a DaemonSet or a Node (static pod). Whether its nomination to a
// NodeClaim still holds is the NominationRule's to judge (nomination.go).
package podproj

import (
	corev1 "k8s.io/api/core/v1"
)

// notMarked is Pending's reason for a pod kube-scheduler has not marked unschedulable.
const notMarked = "not marked unschedulable by kube-scheduler"

// Pending reports whether the pod waits for capacity that does not exist yet; when it does not,
// the reason says why (for debug logs).
func Pending(p *corev1.Pod) (bool, string) {
	switch {
	case p.Spec.NodeName != "":
		return false, "bound to a node"
	case p.DeletionTimestamp != nil:
		return false, "being deleted"
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		return false, "terminal"
	case p.Status.NominatedNodeName != "":
		return false, "preempting on " + p.Status.NominatedNodeName
	case StaysWithNode(p):
		return false, "DaemonSet, static or mirror pod"
	case !Unschedulable(p):
		return false, notMarked
	}
	return true, ""
}

// Unschedulable reports the PodScheduled=False/Unschedulable condition.
func Unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// StaysWithNode reports the pods that belong to their node rather than to capacity: DaemonSet
// pods, and static pods (owned by their Node, or carrying the mirror annotation). They are
// never pending for new capacity, never moved by a drain, and do not keep a node from being
// empty.
func StaysWithNode(p *corev1.Pod) bool {
	return Mirror(p) || OwnedBy(p, "DaemonSet")
}

// Mirror reports a static pod's mirror: owned by its Node, or carrying the mirror annotation.
// The kubelet owns it; the API cannot evict it.
func Mirror(p *corev1.Pod) bool {
	_, annotated := p.Annotations[corev1.MirrorPodAnnotationKey]
	return annotated || OwnedBy(p, "Node")
}

// OwnedBy reports whether the pod's controller is of the given kind.
func OwnedBy(p *corev1.Pod, kind string) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == kind && (o.Controller == nil || *o.Controller) {
			return true
		}
	}
	return false
}
