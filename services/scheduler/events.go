package main

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// Event reasons the scheduler records on pods, as Karpenter records them.
const (
	reasonNominated        = "Nominated"
	reasonFailedScheduling = "FailedScheduling"
	// reasonLaunchMisfit, on a NodeClaim: its node came up without room for what it was launched
	// for (the launch-loop breaker counts it).
	reasonLaunchMisfit = "LaunchMisfit"
)

// nominated tells the pod which NodeClaim (or node) it waits for.
func nominated(r record.EventRecorder, pod *corev1.Pod, kind, name string) {
	r.Eventf(pod, corev1.EventTypeNormal, reasonNominated, "Pod should schedule on: %s/%s", kind, name)
}

// offeredAgain tells the pod that its nomination ended and why, and that it is being scheduled
// again.
func offeredAgain(r record.EventRecorder, pod *corev1.Pod, why string) {
	r.Eventf(pod, corev1.EventTypeWarning, reasonFailedScheduling, "Scheduling pod again: %s", why)
}

// failedScheduling tells the pod why no NodePool can take it.
func failedScheduling(r record.EventRecorder, pod *corev1.Pod, reason string) {
	r.Eventf(pod, corev1.EventTypeWarning, reasonFailedScheduling, "Failed to schedule pod, %s", reason)
}

// launchMisfit tells a NodeClaim that its node did not hold the pods it was launched for.
func launchMisfit(r record.EventRecorder, nc runtime.Object, why string) {
	r.Eventf(nc, corev1.EventTypeWarning, reasonLaunchMisfit, "Node did not hold the pods it was launched for: %s", why)
}
