package podproj

import (
	"flag"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// EarlyRule lets a pod count as pending before kube-scheduler has judged it: once it has waited
// After since its creation without kube-scheduler having tried it (no PodScheduled condition).
// Karpenter waits for kube-scheduler's PodScheduled=False/Unschedulable; at a scale-out of
// thousands of pods kube-scheduler's first, failing pass over them is the largest part of the
// wait (half of it at 1,000 pods on the local stack), and capacity planned meanwhile is ready
// when kube-scheduler reaches them. Pods that fit on existing nodes are nominated there, as any
// pending pod is, so no node is bought for them. Zero (the default) is Karpenter's rule.
// pod-watcher and the scheduler take it and must agree: deploy/ sets it once, in the
// fleetwright-settings ConfigMap.
type EarlyRule struct {
	After time.Duration
}

// RegisterFlags adds the rule's flag with its environment fallback.
func (r *EarlyRule) RegisterFlags(fs *flag.FlagSet, env func(key string, def time.Duration) time.Duration) {
	fs.DurationVar(&r.After, "provision-untried-after", env("PROVISION_UNTRIED_AFTER", 0),
		"also plan capacity for a pod kube-scheduler has not tried yet once it is this old (0: only for pods kube-scheduler marked unschedulable, as Karpenter does) (env PROVISION_UNTRIED_AFTER)")
}

// Validate checks the bound.
func (r EarlyRule) Validate() error {
	if r.After < 0 {
		return fmt.Errorf("--provision-untried-after must not be negative")
	}
	return nil
}

// Untried reports a pod kube-scheduler has not tried yet: unbound, for the default scheduler,
// without scheduling gates, and without a PodScheduled condition.
func Untried(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || len(p.Spec.SchedulingGates) > 0 ||
		(p.Spec.SchedulerName != "" && p.Spec.SchedulerName != corev1.DefaultSchedulerName) {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return false
		}
	}
	return true
}

// Pending is Pending (pending.go) with the rule: an untried pod old enough counts too. due is
// when an untried pod too young now will count (zero when it never will by age).
func (r EarlyRule) Pending(p *corev1.Pod, now time.Time) (pending bool, why string, due time.Time) {
	pending, why = Pending(p)
	if pending || r.After <= 0 || why != notMarked || !Untried(p) {
		return pending, why, time.Time{}
	}
	// Creation times have whole seconds: a pod counts a little early rather than late.
	at := p.CreationTimestamp.Add(r.After)
	if now.Before(at) {
		return false, "not tried by kube-scheduler yet", at
	}
	return true, "", time.Time{}
}
