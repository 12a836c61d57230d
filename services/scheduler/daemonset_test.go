package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// agentDaemonSet makes Karpenter's regression-suite DaemonSet in the test's namespace: one
// container with only a memory limit, tolerating every taint.
func (e *env) agentDaemonSet() *appsv1.DaemonSet {
	e.t.Helper()
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: e.ns}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "a", Image: "pause", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}}}
	ds, err := e.kube.AppsV1().DaemonSets(e.ns).Create(e.ctx, ds, metav1.CreateOptions{})
	require.NoError(e.t, err)
	// Every node of every pool runs a DaemonSet of any namespace: the next test's scheduler must
	// not find this one (a namespace's deletion removes it only later).
	e.t.Cleanup(func() {
		dss := e.kube.AppsV1().DaemonSets(ds.Namespace)
		_ = dss.Delete(context.Background(), ds.Name, metav1.DeleteOptions{})
		require.Eventually(e.t, func() bool {
			_, err := dss.Get(context.Background(), ds.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, time.Minute, 100*time.Millisecond, "DaemonSet %s/%s is gone", ds.Namespace, ds.Name)
	})
	return ds
}

func (e *env) limitRange(item corev1.LimitRangeItem) *corev1.LimitRange {
	e.t.Helper()
	item.Type = corev1.LimitTypeContainer
	lr, err := e.kube.CoreV1().LimitRanges(e.ns).Create(e.ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: e.ns},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	return lr
}

// memoryOnly asks for 4 bytes of memory and nothing else, as the regression suite's workload.
func memoryOnly(spec *corev1.PodSpec) {
	spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4")}}
}

// A DaemonSet's pods are sized as admission will make them, not as the template reads: in a
// namespace whose LimitRange gives containers a CPU, the agent (only a memory limit in its
// template) will take a CPU and 1Gi on the new node, beside the pod it is launched for. Sized
// from the template, the node held the agent and not the pod, and the pod launched a node every
// few seconds (Karpenter's regression suite, "Integration DaemonSet ... LimitRange").
func TestDaemonSetPodsAreSizedAsAdmitted(t *testing.T) {
	for _, tt := range []struct {
		name string
		item corev1.LimitRangeItem
	}{
		{"default", corev1.LimitRangeItem{Default: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
		{"defaultrequest", corev1.LimitRangeItem{DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "sched-limitrange-"+tt.name, v1Example)
			e.limitRange(tt.item)
			e.agentDaemonSet()
			e.start("limitrange-" + tt.name)
			pods := e.pendingPods("large-app", 1, "1", memoryOnly)
			require.Equal(t, "1", pods[0].Spec.Containers[0].Resources.Requests.Cpu().String(), "admission gave the pod 1 CPU")
			intent, _ := e.schedule("lr-1", pods)
			q := intent.GetResources().GetQuantities()
			assert.Equal(t, int64(2000), q["cpu"], "the pod's CPU and the agent's, as admission sets them")
			assert.Equal(t, int64(1<<30+4), q["memory"], "the agent's 1Gi (its limit) and the pod's 4 bytes")
		})
	}
}

// A DaemonSet's newest pod says what admission really gave it — a webhook, a sidecar injector, a
// LimitRange since deleted — and the overhead of a new node is at least that.
func TestDaemonSetPodRaisedToItsNewestPod(t *testing.T) {
	e := newEnv(t, "sched-dspod", v1Example)
	lr := e.limitRange(corev1.LimitRangeItem{DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}})
	ds := e.agentDaemonSet()
	// A node of no pool's, tainted so only DaemonSet pods land there: the agent gets its pod.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "daemons-only-" + e.ns, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "test/daemons-only", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10")},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10")}}}
	_, err := e.kube.CoreV1().Nodes().Create(e.ctx, node, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.kube.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	require.Eventually(t, func() bool {
		pods, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=agent"})
		return err == nil && len(pods.Items) == 1 && pods.Items[0].Spec.Containers[0].Resources.Requests.Cpu().MilliValue() == 1500
	}, time.Minute, 100*time.Millisecond, "the DaemonSet controller makes the agent's pod, admitted with 1500m")
	require.NoError(t, e.kube.CoreV1().LimitRanges(e.ns).Delete(e.ctx, lr.Name, metav1.DeleteOptions{}))

	e.start("dspod")
	intent, _ := e.schedule("dspod-1", e.pendingPods("inflate", 1, "500m"))
	assert.Equal(t, int64(2000), intent.GetResources().GetQuantities()["cpu"],
		"the pod's 500m and the 1500m the agent's pod %s/%s really asks for (its template asks for none)", ds.Namespace, ds.Name)
}
