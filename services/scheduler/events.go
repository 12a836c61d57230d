package main

import (
	"golang.org/x/time/rate"
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

// nominatedUntold tells a NodeClaim how many pods were nominated to it by one write, and how
// many of them got no Nominated event of their own (the events' budget was spent).
func nominatedUntold(r record.EventRecorder, claim *corev1.ObjectReference, pods, untold int) {
	r.Eventf(claim, corev1.EventTypeNormal, reasonNominated,
		"Nominated %d pod(s) to this NodeClaim; %d of them were not told so in an event of their own (--nominated-event-burst/--nominated-event-qps): its nominated.fleetwright.io annotations, or fleetwright why pod, name them", pods, untold)
}

// nominatedEvents bounds the per-pod Nominated events. A scale-out of thousands of pods would
// otherwise make an event (an API call) per pod, the scheduler's largest API cost, and more than
// client-go's event broadcaster queues, which then drops events silently. Instead each pod is
// told at most once per claim (recent remembers it), per-pod events are taken from a token
// bucket, and the pods the bucket leaves untold are counted in one event on their claim.
type nominatedEvents struct {
	recorder record.EventRecorder
	recent   *recent
	budget   *rate.Limiter
}

func newNominatedEvents(r record.EventRecorder, rc *recent, burst int, qps float64) *nominatedEvents {
	return &nominatedEvents{recorder: r, recent: rc, budget: rate.NewLimiter(rate.Limit(qps), burst)}
}

// tell records the Nominated events of pods nominated to the claim by one write.
func (e *nominatedEvents) tell(claim, claimUID string, pods []*corev1.Pod) {
	untold := 0
	for _, pod := range pods {
		if e.recent.toldNominated(string(pod.UID), claim) {
			continue
		}
		if !e.budget.Allow() {
			untold++
			continue
		}
		e.recent.tellNominated(string(pod.UID), claim)
		nominated(e.recorder, pod, "nodeclaim", claim)
	}
	if untold > 0 {
		nominatedUntold(e.recorder, clusterstate.ClaimRef(claim, claimUID), len(pods), untold)
	}
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
