package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// planPod is a fixture: a running pod named name with a 30 s terminationGracePeriodSeconds;
// opts change it.
func planPod(name string, opts ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:   corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](30)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func ownedBy(kind string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: "owner", Controller: ptr.To(true)}}
	}
}
func tolerates(t corev1.Toleration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, t) }
}
func priority(class string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName = class }
}
func podGrace(s int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(s) }
}
func doNotDisrupt(v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: v} }
}
func startedAt(t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: t} }
}

// terminating: deleted at, with grace seconds (its deletionTimestamp is at + grace).
func terminating(at time.Time, grace int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: at.Add(time.Duration(grace) * time.Second)}
		p.DeletionGracePeriodSeconds = ptr.To(grace)
	}
}

// What a drain round does about each pod: evict in Karpenter's four groups (other pods,
// DaemonSet pods, critical pods, critical DaemonSet pods), each once the groups before it are
// gone; leave mirror and finished pods and pods tolerating karpenter.sh/disrupted; hold
// do-not-disrupt pods
// (but for an interruption); and at the deadline less each pod's own grace, delete it with the
// time left as its grace, never less than 1 s.
func TestPlanRound(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	type step struct {
		Action   podAction
		Grace    int64
		DeleteAt time.Time
		Until    time.Time
	}
	cases := []struct {
		name string
		pods []corev1.Pod
		pol  drainPolicy
		want map[string]step // by pod name; pods not named are not waited for
		next time.Time
	}{
		{name: "no deadline: every pod evicted", pods: []corev1.Pod{planPod("a"), planPod("b")},
			want: map[string]step{"a": {Action: evictPod}, "b": {Action: evictPod}}},
		{name: "mirror and finished pods and pods tolerating the disrupted taint are left", pods: []corev1.Pod{
			planPod("ds", ownedBy("DaemonSet"), tolerates(corev1.Toleration{Operator: corev1.TolerationOpExists})),
			planPod("agent", ownedBy("DaemonSet"), tolerates(corev1.Toleration{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
			planPod("static", ownedBy("Node")),
			planPod("mirror", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }),
			planPod("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			planPod("failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
			planPod("app", ownedBy("ReplicaSet")),
			planPod("other-taint", ownedBy("DaemonSet"), tolerates(corev1.Toleration{Key: "example.com/other", Operator: corev1.TolerationOpExists}))},
			want: map[string]step{"app": {Action: evictPod}, "other-taint": {Action: laterPod}}},
		{name: "a pod past its deletionTimestamp is not waited for", pods: []corev1.Pod{
			planPod("stuck", terminating(now.Add(-time.Minute), 30)), planPod("going", terminating(now.Add(-time.Second), 30))},
			want: map[string]step{"going": {Action: awaitPod}}},
		{name: "DaemonSet and critical pods wait for the others", pods: []corev1.Pod{
			planPod("dns", priority("system-cluster-critical")), planPod("proxy", priority("system-node-critical"), ownedBy("DaemonSet")),
			planPod("app", priority("high")), planPod("ds", ownedBy("DaemonSet"))},
			want: map[string]step{"dns": {Action: laterPod}, "proxy": {Action: laterPod}, "app": {Action: evictPod}, "ds": {Action: laterPod}}},
		{name: "critical pods wait for DaemonSet pods", pods: []corev1.Pod{
			planPod("dns", priority("system-cluster-critical")), planPod("proxy", priority("system-node-critical"), ownedBy("DaemonSet")),
			planPod("ds", ownedBy("DaemonSet"))},
			want: map[string]step{"dns": {Action: laterPod}, "proxy": {Action: laterPod}, "ds": {Action: evictPod}}},
		{name: "critical DaemonSet pods go last", pods: []corev1.Pod{
			planPod("dns", priority("system-cluster-critical")), planPod("proxy", priority("system-node-critical"), ownedBy("DaemonSet"))},
			want: map[string]step{"dns": {Action: evictPod}, "proxy": {Action: laterPod}}},
		{name: "and go once nothing else is left", pods: []corev1.Pod{
			planPod("proxy", priority("system-node-critical"), ownedBy("DaemonSet")), planPod("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })},
			want: map[string]step{"proxy": {Action: evictPod}}},
		{name: "critical pods wait for the others still terminating", pods: []corev1.Pod{
			planPod("dns", priority("system-cluster-critical")), planPod("app", terminating(now, 30))},
			want: map[string]step{"dns": {Action: laterPod}, "app": {Action: awaitPod}}},
		{name: "critical pods go once the others are gone", pods: []corev1.Pod{
			planPod("dns", priority("system-cluster-critical")), planPod("ds", ownedBy("DaemonSet"), tolerates(corev1.Toleration{Operator: corev1.TolerationOpExists}))},
			want: map[string]step{"dns": {Action: evictPod}}},
		{name: "deadline far: evicted, each with its delete time", pods: []corev1.Pod{planPod("a"), planPod("b", podGrace(90))},
			pol:  drainPolicy{Deadline: now.Add(5 * time.Minute)},
			want: map[string]step{"a": {Action: evictPod, DeleteAt: now.Add(270 * time.Second)}, "b": {Action: evictPod, DeleteAt: now.Add(210 * time.Second)}},
			next: now.Add(210 * time.Second)},
		{name: "deadline less own grace reached: deleted with the time left", pods: []corev1.Pod{planPod("a"), planPod("b", podGrace(10))},
			pol: drainPolicy{Deadline: now.Add(20 * time.Second)},
			want: map[string]step{"a": {Action: deletePod, Grace: 20, DeleteAt: now.Add(-10 * time.Second)},
				"b": {Action: evictPod, DeleteAt: now.Add(10 * time.Second)}},
			next: now.Add(10 * time.Second)},
		{name: "at the delete time exactly: deleted with its whole grace", pods: []corev1.Pod{planPod("a")},
			pol:  drainPolicy{Deadline: now.Add(30 * time.Second)},
			want: map[string]step{"a": {Action: deletePod, Grace: 30, DeleteAt: now}}},
		{name: "past the deadline: grace 1 s, never 0", pods: []corev1.Pod{planPod("a"), planPod("zero", podGrace(0))},
			pol:  drainPolicy{Deadline: now.Add(-time.Minute)},
			want: map[string]step{"a": {Action: deletePod, Grace: 1, DeleteAt: now.Add(-90 * time.Second)}, "zero": {Action: deletePod, Grace: 1, DeleteAt: now.Add(-time.Minute)}}},
		{name: "less than a second left: grace 1 s", pods: []corev1.Pod{planPod("a", podGrace(5))},
			pol:  drainPolicy{Deadline: now.Add(400 * time.Millisecond)},
			want: map[string]step{"a": {Action: deletePod, Grace: 1, DeleteAt: now.Add(400*time.Millisecond - 5*time.Second)}}},
		{name: "critical pods are deleted at their time too, whatever the order", pods: []corev1.Pod{
			planPod("dns", priority("system-cluster-critical")), planPod("app", podGrace(5))},
			pol:  drainPolicy{Deadline: now.Add(10 * time.Second)},
			want: map[string]step{"dns": {Action: deletePod, Grace: 10, DeleteAt: now.Add(-20 * time.Second)}, "app": {Action: evictPod, DeleteAt: now.Add(5 * time.Second)}},
			next: now.Add(5 * time.Second)},
		{name: "an evicted pod whose grace ends past the deadline is deleted again, shorter", pods: []corev1.Pod{
			planPod("slow", podGrace(600), terminating(now.Add(-time.Minute), 600)), planPod("fits", podGrace(600), terminating(now.Add(-time.Minute), 60))},
			pol: drainPolicy{Deadline: now.Add(2 * time.Minute)},
			want: map[string]step{"slow": {Action: deletePod, Grace: 120, DeleteAt: now.Add(-8 * time.Minute)},
				"fits": {Action: awaitPod, DeleteAt: now.Add(-8 * time.Minute)}}},
		{name: "one deleted for the deadline already is not deleted again", pods: []corev1.Pod{planPod("a", terminating(now.Add(-time.Second), 1))},
			pol:  drainPolicy{Deadline: now.Add(-5 * time.Second)},
			want: map[string]step{"a": {Action: awaitPod, DeleteAt: now.Add(-35 * time.Second)}}},
		{name: "do-not-disrupt held without a deadline, for good", pods: []corev1.Pod{planPod("keep", doNotDisrupt("true")), planPod("a")},
			want: map[string]step{"keep": {Action: holdPod}, "a": {Action: evictPod}}},
		{name: "do-not-disrupt held until its delete time, then deleted", pods: []corev1.Pod{
			planPod("keep", doNotDisrupt("true")), planPod("short", doNotDisrupt("true"), podGrace(5))},
			pol:  drainPolicy{Deadline: now.Add(20 * time.Second)},
			want: map[string]step{"keep": {Action: deletePod, Grace: 20, DeleteAt: now.Add(-10 * time.Second)}, "short": {Action: holdPod, DeleteAt: now.Add(15 * time.Second)}},
			next: now.Add(15 * time.Second)},
		{name: "a do-not-disrupt duration holds until it ends", pods: []corev1.Pod{
			planPod("young", doNotDisrupt("10m"), startedAt(now.Add(-5*time.Minute))), planPod("old", doNotDisrupt("10m"), startedAt(now.Add(-time.Hour))),
			planPod("bad", doNotDisrupt("soon"))},
			want: map[string]step{"young": {Action: holdPod, Until: now.Add(5 * time.Minute)}, "old": {Action: evictPod}, "bad": {Action: evictPod}},
			next: now.Add(5 * time.Minute)},
		{name: "an interruption evicts do-not-disrupt pods", pods: []corev1.Pod{planPod("keep", doNotDisrupt("true"))},
			pol:  drainPolicy{Deadline: now.Add(time.Minute), Interruption: true},
			want: map[string]step{"keep": {Action: evictPod, DeleteAt: now.Add(30 * time.Second)}},
			next: now.Add(30 * time.Second)},
		{name: "a held pod holds critical pods back", pods: []corev1.Pod{
			planPod("keep", doNotDisrupt("true")), planPod("dns", priority("system-node-critical"))},
			want: map[string]step{"keep": {Action: holdPod}, "dns": {Action: laterPod}}},
		{name: "unset terminationGracePeriodSeconds counts as the API's 30 s", pods: []corev1.Pod{
			planPod("a", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil })},
			pol:  drainPolicy{Deadline: now.Add(time.Minute)},
			want: map[string]step{"a": {Action: evictPod, DeleteAt: now.Add(30 * time.Second)}},
			next: now.Add(30 * time.Second)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := planRound(c.pods, c.pol, now)
			got := map[string]step{}
			for _, s := range plan.Steps {
				got[s.Pod.Name] = step{Action: s.Action, Grace: s.Grace, DeleteAt: s.DeleteAt, Until: s.Until}
			}
			if c.want == nil {
				c.want = map[string]step{}
			}
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.next, plan.Next, "next")
		})
	}
}
