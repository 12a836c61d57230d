package e2e_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// Karpenter's regression suite's "Integration DaemonSet" specs and the launch-loop breaker,
// against the whole stack: the scheduler must size a node for the DaemonSet pods that will
// really land on it, and stop when it cannot predict them.

// dsStack is a stack with the terminator and the regression suite's pool (c/m/r of a generation
// above 4, consolidated at once).
func dsStack(t *testing.T, opt e2e.Options) *e2e.Stack {
	t.Helper()
	opt.Services = withTerminator()
	s := e2e.NewStackWith(t, opt)
	s.Apply("tools/e2e/testdata/daemonset-pool.yaml")
	return s
}

type podOpts struct {
	labels      map[string]string
	resources   corev1.ResourceRequirements
	priority    string
	hostPort    int32
	arch        string
	nodeLabel   string // a node label the pod requires to be "true"
	tolerateAll bool
}

func podSpec(o podOpts) corev1.PodTemplateSpec {
	c := corev1.Container{Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7", Resources: o.resources}
	if o.hostPort != 0 {
		c.Ports = []corev1.ContainerPort{{ContainerPort: o.hostPort, HostPort: o.hostPort}}
	}
	spec := corev1.PodSpec{Containers: []corev1.Container{c}, PriorityClassName: o.priority, TerminationGracePeriodSeconds: new(int64)}
	if o.arch != "" {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{o.arch}}}}}}}}
	}
	if o.nodeLabel != "" {
		spec.NodeSelector = map[string]string{o.nodeLabel: "true"}
	}
	if o.tolerateAll {
		spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: o.labels}, Spec: spec}
}

func createDaemonSet(t *testing.T, s *e2e.Stack, name string, o podOpts) {
	t.Helper()
	o.labels = map[string]string{"app": name}
	_, err := s.Kube.AppsV1().DaemonSets("default").Create(context.Background(), &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: o.labels}, Template: podSpec(o)}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func createDeployment(t *testing.T, s *e2e.Stack, name string, replicas int32, o podOpts) {
	t.Helper()
	o.labels = map[string]string{"app": name}
	_, err := s.Kube.AppsV1().Deployments("default").Create(context.Background(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: o.labels},
			Template: podSpec(o)}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func createLimitRange(t *testing.T, s *e2e.Stack, item corev1.LimitRangeItem) {
	t.Helper()
	item.Type = corev1.LimitTypeContainer
	_, err := s.Kube.CoreV1().LimitRanges("default").Create(context.Background(), &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "limitrange", Namespace: "default"},
		Spec:       corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// runningOn lists the Running pods matching the selector, by node.
func runningOn(t *testing.T, s *e2e.Stack, selector string) map[string][]string {
	t.Helper()
	pods, err := s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	out := map[string][]string{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p.Name)
		}
	}
	return out
}

// podOf waits for the one pod matching the selector and returns it.
func podOf(t *testing.T, s *e2e.Stack, selector string) *corev1.Pod {
	t.Helper()
	var pods *corev1.PodList
	require.Eventually(t, func() bool {
		var err error
		pods, err = s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(pods.Items) == 1
	}, time.Minute, 200*time.Millisecond, "one pod %s", selector)
	return &pods.Items[0]
}

// settled checks that, over a few of the scheduler's and terminator's rounds, no further
// NodeClaim is made for the pod's workload than the want already made.
func settled(t *testing.T, s *e2e.Stack, pod *corev1.Pod, want int) {
	t.Helper()
	for range 15 {
		assert.LessOrEqual(t, len(s.ClaimLog().LaunchedFor(pod)), want, "nodeclaims launched for %s", pod.Name)
		time.Sleep(time.Second)
	}
	require.Len(t, s.ClaimLog().LaunchedFor(pod), want, "nodeclaims launched for %s", pod.Name)
}

// "should account for LimitRange Default (DefaultRequest) on daemonSet pods for resources": a
// DaemonSet whose template asks for no CPU gets 2 CPUs from the namespace's LimitRange, with a
// priority that lets it take the node first; the pod the node is launched for must still fit
// beside it. Sized from the template, the node held the DaemonSet pod only, and one pending pod
// launched a node every few seconds (issue 29).
func TestDaemonSetLimitRange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		item corev1.LimitRangeItem
	}{
		{"Default", corev1.LimitRangeItem{Default: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
		{"DefaultRequest", corev1.LimitRangeItem{DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := dsStack(t, e2e.Options{})
			ctx := context.Background()
			createLimitRange(t, s, tt.item)
			_, err := s.Kube.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
				ObjectMeta: metav1.ObjectMeta{Name: "high-priority-daemonsets"}, Value: 10000000}, metav1.CreateOptions{})
			require.NoError(t, err)
			createDaemonSet(t, s, "daemon", podOpts{priority: "high-priority-daemonsets", tolerateAll: true,
				resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}})
			createDeployment(t, s, "large-app", 1, podOpts{
				resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4")}}})

			require.Eventually(t, func() bool {
				app, daemon := runningOn(t, s, "app=large-app"), runningOn(t, s, "app=daemon")
				nodes := launchedNodes(t, s)
				return len(nodes) == 1 && len(app[nodes[0].Name]) == 1 && len(daemon[nodes[0].Name]) == 1
			}, 3*time.Minute, time.Second, "one node, with the app's pod and the DaemonSet's pod Running on it")
			settled(t, s, podOf(t, s, "app=large-app"), 1)
		})
	}
}

// "should correctly account for host ports of uncached daemonset pods targeting different
// instance types": two DaemonSets bind different host ports on different architectures; a pod
// wanting one of those ports must land on the other architecture. No DaemonSet pod exists
// before the first node (they select a label only this pool's nodes carry).
func TestDaemonSetHostPortsPerInstanceType(t *testing.T) {
	t.Parallel()
	s := dsStack(t, e2e.Options{})
	s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p",
		`{"spec":{"template":{"metadata":{"labels":{"testing/karpenter-node":"true"}}},"disruption":{"consolidateAfter":"30s"}}}`)
	createDaemonSet(t, s, "ds-amd64", podOpts{nodeLabel: "testing/karpenter-node", arch: "amd64", hostPort: 8000})
	createDaemonSet(t, s, "ds-arm64", podOpts{nodeLabel: "testing/karpenter-node", arch: "arm64", hostPort: 9000})
	cpu := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
	createDeployment(t, s, "ds-hostport-8000", 1, podOpts{hostPort: 8000, arch: "arm64", resources: cpu})
	createDeployment(t, s, "ds-hostport-9000", 1, podOpts{hostPort: 9000, arch: "amd64", resources: cpu})

	podsRunning(t, s, "app=ds-hostport-8000", 1, 3*time.Minute)
	podsRunning(t, s, "app=ds-hostport-9000", 1, 3*time.Minute)
	podsRunning(t, s, "app=ds-amd64", 1, time.Minute)
	podsRunning(t, s, "app=ds-arm64", 1, time.Minute)
	for _, app := range []string{"ds-hostport-8000", "ds-hostport-9000"} {
		pod := podOf(t, s, "app="+app)
		for _, e := range podEvents(t, s, "FailedScheduling") {
			assert.NotContains(t, e, pod.Name, "the scheduler told %s it could not be scheduled", app)
		}
		assert.Len(t, s.ClaimLog().LaunchedFor(pod), 1, "one node launched for %s", app)
	}
}

// A LimitRange made after the DaemonSet's pods exist: its newest pod asks for no CPU, but the
// next one, on the next node, will ask for 3. The scheduler sizes the next node for the pod
// admission will make, not for the pod it saw last.
func TestDaemonSetLimitRangeAddedLater(t *testing.T) {
	t.Parallel()
	s := dsStack(t, e2e.Options{})
	createDaemonSet(t, s, "agent", podOpts{tolerateAll: true})
	createDeployment(t, s, "web", 1, podOpts{resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}})
	podsRunning(t, s, "app=web", 1, 3*time.Minute)
	podsRunning(t, s, "app=agent", 1, time.Minute)

	createLimitRange(t, s, corev1.LimitRangeItem{DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}})
	s.Kubectl("scale", "deployment", "web", "--replicas", "3")
	podsRunning(t, s, "app=web", 3, 3*time.Minute)
	require.Eventually(t, func() bool {
		agents := runningOn(t, s, "app=agent")
		for _, n := range launchedNodes(t, s) {
			if len(agents[n.Name]) != 1 {
				return false
			}
		}
		return true
	}, time.Minute, time.Second, "an agent pod Running on every node")
	pods, err := s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	web := &pods.Items[0] // the three share a workload
	launched := s.ClaimLog().LaunchedFor(web)
	assert.LessOrEqual(t, len(launched), 3, "one node for the first pod, at most one each for the two more")
	settled(t, s, web, len(launched))
	for _, nc := range launched {
		_, misfit := podproj.MisfitOf(nc)
		assert.False(t, misfit, "nodeclaim %s held what it was launched for", nc.Name)
	}
}

// A node image whose bootstrap reserves more memory than the scheduler plans with: every node
// launched for the pod comes up too small for it. No prediction can help; the breaker stops
// after --max-failed-launches, says why in the pod's events, keeps the last node while the pod
// waits, and counts it.
func TestLaunchLoopBreaker(t *testing.T) {
	t.Parallel()
	limits := []string{"--max-failed-launches", "2", "--failed-launch-hold", "10m"}
	s := dsStack(t, e2e.Options{ServiceArgs: map[string][]string{"scheduler": limits}})
	require.NoError(t, s.Emu.SetNodeOverhead(context.Background(), corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("6Gi")}))
	createDeployment(t, s, "big", 1, podOpts{resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("3Gi")}}})

	pod := podOf(t, s, "app=big")
	require.Eventually(t, func() bool {
		for _, e := range podEvents(t, s, "FailedScheduling") {
			if strings.Contains(e, "not launching another node for it: 2 node(s) launched for its workload came up and did not hold it") {
				return true
			}
		}
		return false
	}, 3*time.Minute, time.Second, "the pod is told the breaker stopped the launches")
	settled(t, s, pod, 2)
	claims := s.ClaimLog().LaunchedFor(pod)
	for _, nc := range claims {
		m, ok := podproj.MisfitOf(nc)
		require.True(t, ok, "nodeclaim %s records its misfit", nc.Name)
		assert.Contains(t, m.Why, "memory allocatable where")
	}
	// The last node launched for it stays while it waits; the one before is consolidated away.
	last := claims[len(claims)-1].Name
	require.Eventually(t, func() bool {
		live := s.NodeClaims(t)
		return len(live) == 1 && live[0].Name == last
	}, 2*time.Minute, time.Second, "only the last nodeclaim launched for the pod (%s) is left", last)

	metrics := scrape(t, s, "scheduler")
	assert.Regexp(t, `fleetwright_scheduler_launch_loop_held_pods_total [1-9]`, metrics)
	assert.Contains(t, metrics, "fleetwright_scheduler_launch_misfits_total 2")

	var r struct {
		LaunchLoop struct {
			FailedLaunches int    `json:"failedLaunches"`
			LastNodeClaim  string `json:"lastNodeClaim"`
			LastMisfit     string `json:"lastMisfit"`
		} `json:"launchLoop"`
	}
	whyJSON(t, s, &r, "pod", "default/"+pod.Name)
	assert.Equal(t, 2, r.LaunchLoop.FailedLaunches)
	assert.Equal(t, last, r.LaunchLoop.LastNodeClaim)
	assert.Contains(t, r.LaunchLoop.LastMisfit, "registered")
}

// scrape reads a service's /metrics.
func scrape(t *testing.T, s *e2e.Stack, service string) string {
	t.Helper()
	resp, err := http.Get(s.AdminURL(service) + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
