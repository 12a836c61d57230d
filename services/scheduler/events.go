package main

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// Event reasons the scheduler records on pods and NodePools, as Karpenter records them.
const (
	reasonNominated                 = "Nominated"
	reasonFailedScheduling          = "FailedScheduling"
	reasonNoCompatibleInstanceTypes = "NoCompatibleInstanceTypes"
	// reasonLaunchMisfit, on a NodeClaim: its node came up without room for what it was launched
	// for (the launch-loop breaker counts it).
	reasonLaunchMisfit = "LaunchMisfit"
)

// noCompatibleInstanceTypes tells a NodePool that its own requirements leave no instance type
// (or too few for its minValues), in Karpenter's words.
func noCompatibleInstanceTypes(r record.EventRecorder, name string, uid types.UID, minValues bool) {
	msg := "NodePool requirements filtered out all compatible available instance types"
	if minValues {
		msg += " due to minValues incompatibility"
	}
	r.Event(clusterstate.PoolRef(name, uid), corev1.EventTypeWarning, reasonNoCompatibleInstanceTypes, msg)
}

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
