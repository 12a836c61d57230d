package podproj

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With the rule off a pod waits for kube-scheduler's verdict, as with Karpenter; with it on, a
// pod kube-scheduler has not tried counts once old enough, and says when it will before that —
// but never a gated pod, one of another scheduler, or one kube-scheduler has judged otherwise.
func TestEarlyRuleCountsUntriedPodsOnceOldEnough(t *testing.T) {
	created := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	pod := func(mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(created)}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	untried := pod(nil)
	marked := pod(func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	})
	gated := pod(func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}} })
	other := pod(func(p *corev1.Pod) { p.Spec.SchedulerName = "my-scheduler" })
	tried := pod(func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulerError"}}
	})
	bound := pod(func(p *corev1.Pod) { p.Spec.NodeName = "n1" })

	off := EarlyRule{}
	on := EarlyRule{After: 2 * time.Second}
	later := created.Add(time.Minute)

	pending, _, due := off.Pending(untried, later)
	assert.False(t, pending, "off: an untried pod waits for kube-scheduler")
	assert.True(t, due.IsZero())
	pending, _, _ = off.Pending(marked, created)
	assert.True(t, pending, "off: a marked pod is pending")

	pending, why, due := on.Pending(untried, created.Add(time.Second))
	assert.False(t, pending, "on: too young yet")
	assert.Equal(t, created.Add(2*time.Second), due, "and it says when it will count")
	assert.NotEmpty(t, why)
	pending, _, due = on.Pending(untried, created.Add(2*time.Second))
	assert.True(t, pending, "on: old enough")
	assert.True(t, due.IsZero())
	pending, _, _ = on.Pending(marked, created)
	assert.True(t, pending, "on: a marked pod is pending at once, as always")
	for name, p := range map[string]*corev1.Pod{"gated": gated, "another scheduler's": other, "tried and not unschedulable": tried, "bound": bound} {
		pending, _, due = on.Pending(p, later)
		assert.False(t, pending, "on: a %s pod never counts by age", name)
		assert.True(t, due.IsZero(), "on: a %s pod has no due time", name)
	}
}
