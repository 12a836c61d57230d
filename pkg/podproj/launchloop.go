package podproj

import (
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// A launch loop: a node is launched for a pod, comes up, and does not hold it — admission grew
// its DaemonSet pods past what was planned, or the node came up smaller than its type promised —
// so the pod is pending again, another node is launched for it, the one before is emptied away,
// and round again, a node every few seconds. The scheduler cannot always predict what changes a
// node (a webhook it cannot see), but it can see that it happened, and stop.
//
// The record lives on the NodeClaims, so every service and every leader reads the same:
//
//	LaunchedForAnnotation  written when the claim is made: the workloads (a pod's controller, or
//	                       the pod) it is launched for, each with the count of nodes launched for
//	                       that workload before it that came up and did not hold it
//	OverheadAnnotation     written when the claim is made: the DaemonSet requests it was planned with
//	MisfitAnnotation       written by the scheduler's nomination check once the claim's node is
//	                       ready and a pod it was launched for does not fit though the room was
//	                       not taken by other workloads: why, in words, and the workloads whose
//	                       pods it did not hold (Misfit, as JSON)
//
// LaunchLoopRule reads them: a workload whose launches failed MaxFailed times gets no new node
// for Hold after its latest (the scheduler tells its pods why), and the latest claim launched
// for a workload that still has a pending pod, if it misfit, is not taken away as empty or
// underused (the record, and the room the pod may yet get, stay).

// The annotations of the launch-loop record on a NodeClaim.
const (
	LaunchedForAnnotation = "fleetwright.io/launched-for"
	OverheadAnnotation    = "fleetwright.io/daemonset-overhead"
	MisfitAnnotation      = "fleetwright.io/misfit"
)

// WorkloadOf names what a pod is one of, for the launch-loop record: its controller (a
// ReplicaSet's pods are alike, and a pod its controller replaces keeps the count), or the pod
// itself.
func WorkloadOf(p *corev1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil {
		return string(ref.UID)
	}
	return string(p.UID)
}

// LaunchedFor encodes the claim's LaunchedForAnnotation: each workload with the failed launches
// before this claim.
func LaunchedFor(prior map[string]int) string {
	b, _ := json.Marshal(prior) // map[string]int: cannot fail
	return string(b)
}

// Misfit is the MisfitAnnotation's value: why the claim's node did not hold what it was launched
// for, and the workloads whose pods it left pending.
type Misfit struct {
	Why       string   `json:"why"`
	Workloads []string `json:"workloads"`
}

// Value encodes the annotation.
func (m Misfit) Value() string {
	b, _ := json.Marshal(m) // strings: cannot fail
	return string(b)
}

// MisfitOf reads a claim's MisfitAnnotation; ok is false when it has none (or one no scheduler
// wrote).
func MisfitOf(nc *karpv1.NodeClaim) (m Misfit, ok bool) {
	v := nc.Annotations[MisfitAnnotation]
	if v == "" || json.Unmarshal([]byte(v), &m) != nil || m.Why == "" {
		return Misfit{}, false
	}
	return m, true
}

// LaunchHistory is what the NodeClaims say of the nodes launched for one workload.
type LaunchHistory struct {
	// Failed counts the nodes launched for it that came up and did not hold it.
	Failed int
	// Latest is the claim launched for it last, made at LatestAt; LatestMisfit says why its node
	// did not hold the workload's pod ("" if it has not failed, or not yet).
	Latest       string
	LatestAt     time.Time
	LatestMisfit string
}

// LaunchHistories reads the launch-loop record of every workload the claims were launched for.
// A claim being deleted still counts: its failure happened.
func LaunchHistories(claims []*karpv1.NodeClaim) map[string]LaunchHistory {
	out := map[string]LaunchHistory{}
	for _, nc := range claims {
		v := nc.Annotations[LaunchedForAnnotation]
		if v == "" {
			continue
		}
		var prior map[string]int
		if json.Unmarshal([]byte(v), &prior) != nil {
			continue // not written by a scheduler
		}
		m, _ := MisfitOf(nc)
		for w, n := range prior {
			h := out[w]
			misfit := ""
			if slices.Contains(m.Workloads, w) {
				misfit = m.Why
				n++
			}
			h.Failed = max(h.Failed, n)
			at := nc.CreationTimestamp.Time
			if h.Latest == "" || at.After(h.LatestAt) || at.Equal(h.LatestAt) && nc.Name > h.Latest {
				h.Latest, h.LatestAt, h.LatestMisfit = nc.Name, at, misfit
			}
			out[w] = h
		}
	}
	return out
}

// Default bounds of the launch-loop breaker.
const (
	DefaultMaxFailedLaunches = 3
	DefaultFailedLaunchHold  = 10 * time.Minute
)

// LaunchLoopRule bounds launch loops: MaxFailed failed launches for a workload stop new ones for
// Hold after the latest; then one more is tried.
type LaunchLoopRule struct {
	MaxFailed int
	Hold      time.Duration
}

// RegisterFlags adds the rule's bounds as flags with environment fallbacks. The scheduler (which
// stops launching) and the terminator (which keeps the node) take them and must agree: deploy/
// sets them once, in the fleetwright-settings ConfigMap.
func (r *LaunchLoopRule) RegisterFlags(fs *flag.FlagSet, envInt func(key string, def int) int, envDuration func(key string, def time.Duration) time.Duration) {
	fs.IntVar(&r.MaxFailed, "max-failed-launches", envInt("MAX_FAILED_LAUNCHES", DefaultMaxFailedLaunches),
		"stop launching nodes for a workload once this many launched for it came up and did not hold its pod (env MAX_FAILED_LAUNCHES)")
	fs.DurationVar(&r.Hold, "failed-launch-hold", envDuration("FAILED_LAUNCH_HOLD", DefaultFailedLaunchHold),
		"how long a workload whose launches keep failing waits before one more node is launched for it (env FAILED_LAUNCH_HOLD)")
}

// Validate checks the bounds.
func (r LaunchLoopRule) Validate() error {
	if r.MaxFailed < 1 || r.Hold <= 0 {
		return fmt.Errorf("--max-failed-launches must be at least 1 and --failed-launch-hold positive")
	}
	return nil
}

// Held reports whether no node may be launched for the workload now; until is when one may.
func (r LaunchLoopRule) Held(h LaunchHistory, now time.Time) (held bool, until time.Time) {
	if h.Failed < r.MaxFailed {
		return false, time.Time{}
	}
	until = h.LatestAt.Add(r.Hold)
	return now.Before(until), until
}

// Keeps reports the claims that must not be taken away as empty or underused, each with why: the
// latest claim launched for a workload with a pod still pending, whose node did not hold it.
// pending are the pending pods (podproj.Pending).
func (r LaunchLoopRule) Keeps(histories map[string]LaunchHistory, pending []*corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, p := range pending {
		h, ok := histories[WorkloadOf(p)]
		if !ok || h.LatestMisfit == "" {
			continue
		}
		if _, seen := out[h.Latest]; !seen {
			out[h.Latest] = fmt.Sprintf("pod %s/%s it was launched for is still pending (%s)", p.Namespace, p.Name, h.LatestMisfit)
		}
	}
	return out
}
