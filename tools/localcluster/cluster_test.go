package localcluster_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/fleetwright/fleetwright/tools/localcluster"
	"github.com/fleetwright/fleetwright/tools/localcluster/clustertest"
)

func TestMain(m *testing.M) { clustertest.Main(m) }

// inNamespace gives a test the shared cluster, its client, a context for the test's calls and
// a namespace of the test's own.
func inNamespace(t *testing.T, name string) (*localcluster.Cluster, kubernetes.Interface, context.Context, *corev1.Namespace) {
	t.Helper()
	c := clustertest.Get(t)
	client, err := c.Client()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return c, client, ctx, ns
}

// The getting-started shape on the bare control plane: a Deployment scaled to 5 gives 5
// Pending pods; a Node annotated for kwok becomes Ready and the 5 pods run on it.
func TestDeploymentRunsOnKwokNode(t *testing.T) {
	c, client, ctx, ns := inNamespace(t, "cluster-test")

	labels := map[string]string{"app": "inflate"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: ns.Name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](5),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "inflate", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
				}}},
			},
		},
	}
	_, err := client.AppsV1().Deployments(ns.Name).Create(ctx, dep, metav1.CreateOptions{})
	require.NoError(t, err)

	podsWith := func(pred func(corev1.Pod) bool) int {
		pods, err := client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: "app=inflate"})
		if err != nil {
			return -1
		}
		n := 0
		for _, p := range pods.Items {
			if pred(p) {
				n++
			}
		}
		return n
	}
	unschedulable := func(p corev1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return podsWith(unschedulable) == 5 }, 90*time.Second, 250*time.Millisecond,
		"5 pods should be Pending with PodScheduled=False/Unschedulable")

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "kwok-node-1",
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels:      map[string]string{"kubernetes.io/hostname": "kwok-node-1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
		},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
		},
	}
	_, err = client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })

	require.Eventually(t, func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}, 60*time.Second, 250*time.Millisecond, "kwok should make the annotated node Ready")

	running := func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node.Name }
	require.Eventually(t, func() bool { return podsWith(running) == 5 }, 90*time.Second, 250*time.Millisecond,
		"all 5 pods should run on the kwok node")

	// kubectl built with the plane works against the written kubeconfig.
	out, err := exec.CommandContext(ctx, c.Kubectl(), "--kubeconfig", c.Kubeconfig, "get", "nodes", "-o", "name").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, strings.TrimSpace(string(out)), "node/kwok-node-1")
}

// A port picked free can be taken before the component binds it — by a parallel test's stack or
// an outgoing connection's ephemeral port. The component that loses the race gets a new port
// instead of failing the whole start (CI once failed on kube-scheduler exiting here), even when
// what took the port answers its health check as another stack's component would (the start
// once passed on such an answer, and kube-scheduler was found gone minutes later).
func TestStartSurvivesAPortTakenInBetween(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	plain, secure := httptest.NewServer(ok), httptest.NewTLSServer(ok) // etcd serves HTTP, the rest HTTPS
	defer plain.Close()
	defer secure.Close()
	portOf := func(s *httptest.Server) int { return s.Listener.Addr().(*net.TCPAddr).Port }
	handedOut := 0
	defer localcluster.SetFreePorts(func(n int, kernel func(int) ([]int, error)) ([]int, error) {
		ports, err := kernel(n)
		if err == nil && n == 5 {
			// The first pick: etcd's, the controller manager's, the scheduler's and the
			// apiserver's ports are held by servers that answer every health check.
			ports[0], ports[2], ports[3], ports[4] = portOf(plain), portOf(secure), portOf(secure), portOf(secure)
			handedOut++
		}
		return ports, err
	})()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: t.TempDir(), Out: &out})
	require.NoError(t, err, out.String())
	defer c.Stop()
	require.Equal(t, 1, handedOut)
	assert.NotContains(t, c.Server, ":"+strconv.Itoa(portOf(secure)))
	assert.Contains(t, out.String(), "kube-scheduler")
	assert.Contains(t, out.String(), "kube-controller-manager")
	assert.Contains(t, out.String(), "etcd exited before it was ready")
	time.Sleep(2 * time.Second) // a component fooled into "ready" exits within moments of its start
	require.NoError(t, c.Healthy(), "every component started is still running\n%s", out.String())
	client, err := c.Client()
	require.NoError(t, err)
	_, err = client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
}

// kwok plays the kubelet for as long as a node lives, as a kubelet does: it renews the node's
// Lease, so kube-controller-manager never finds the node silent past the node-monitor grace
// period, and never marks its pods NotReady. (kwok without leases sent a status heartbeat
// every 20–45 s: after 40 s every pod went NotReady for good, and a PodDisruptionBudget over
// them blocked every drain.)
func TestKwokNodeStaysReadyPastTheNodeMonitorGracePeriod(t *testing.T) {
	t.Parallel()
	_, client, ctx, ns := inNamespace(t, "heartbeat-test")
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "kwok-heartbeat-1", Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")},
		},
	}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "beat", Namespace: ns.Name},
		Spec:       corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7"}}},
	}
	_, err = client.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)

	podReady := func() bool {
		p, err := client.CoreV1().Pods(ns.Name).Get(ctx, pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady {
				return cond.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	require.Eventually(t, podReady, 60*time.Second, 250*time.Millisecond, "kwok runs the pod")
	renewed := func() time.Time {
		l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return time.Time{}
		}
		return l.Spec.RenewTime.Time
	}
	first := renewed()

	// Past the grace period, and a node-monitor pass or two after it.
	watch := localcluster.NodeMonitorGracePeriod + 15*time.Second
	for end := time.Now().Add(watch); time.Now().Before(end); time.Sleep(time.Second) {
		require.True(t, podReady(), "the pod stays Ready while its node lives")
	}
	last := renewed()
	require.False(t, last.IsZero(), "kwok holds the node's Lease")
	assert.True(t, last.After(first), "and renews it")
}

// A pod labelled kwok.x-k8s.io/stage: unhealthy runs but never becomes Ready, as one whose
// readiness probe fails: Karpenter's suites make a PodDisruptionBudget unhealthy so. Other pods
// still become Ready; a deleted pod goes at once unless it has a preStop hook, which holds it
// Terminating through its grace period.
func TestKwokKeepsAnUnhealthyPodNotReady(t *testing.T) {
	t.Parallel()
	_, client, ctx, ns := inNamespace(t, "stages-test")
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "kwok-stages-1", Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")},
		},
	}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	pod := func(name string, labels map[string]string) {
		_, err := client.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name, Labels: labels},
			Spec:       corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	pod("healthy", nil)
	pod("unhealthy", map[string]string{"kwok.x-k8s.io/stage": "unhealthy"})
	state := func(name string) (phase corev1.PodPhase, ip string, ready bool) {
		p, err := client.CoreV1().Pods(ns.Name).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady {
				ready = cond.Status == corev1.ConditionTrue
			}
		}
		return p.Status.Phase, p.Status.PodIP, ready
	}
	require.Eventually(t, func() bool {
		_, _, ready := state("healthy")
		phase, ip, _ := state("unhealthy")
		return ready && phase == corev1.PodRunning && ip != ""
	}, 60*time.Second, 250*time.Millisecond, "kwok starts both pods and makes the healthy one Ready")
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		_, _, ready := state("unhealthy")
		require.False(t, ready, "the unhealthy pod never becomes Ready")
	}

	// Deleting a pod ends it at once, whatever its grace period.
	require.NoError(t, client.CoreV1().Pods(ns.Name).Delete(ctx, "unhealthy", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(120))}))
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().Pods(ns.Name).Get(ctx, "unhealthy", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 250*time.Millisecond, "kwok removes a deleted pod")

	// One with a preStop hook stays Terminating until its grace period ends, as with a kubelet
	// whose hook outlasts it.
	_, err = client.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "prestop", Namespace: ns.Name},
		Spec: corev1.PodSpec{NodeName: node.Name, TerminationGracePeriodSeconds: ptr.To(int64(8)), Containers: []corev1.Container{{
			Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "300"}}}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { phase, _, _ := state("prestop"); return phase == corev1.PodRunning },
		60*time.Second, 250*time.Millisecond, "kwok starts the pod")
	deleted := time.Now()
	require.NoError(t, client.CoreV1().Pods(ns.Name).Delete(ctx, "prestop", metav1.DeleteOptions{}))
	for time.Since(deleted) < 5*time.Second {
		p, err := client.CoreV1().Pods(ns.Name).Get(ctx, "prestop", metav1.GetOptions{})
		require.NoError(t, err, "the pod is still there within its grace period")
		require.NotNil(t, p.DeletionTimestamp, "and Terminating")
		time.Sleep(500 * time.Millisecond)
	}
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().Pods(ns.Name).Get(ctx, "prestop", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 250*time.Millisecond, "kwok removes it once its grace period is over")
}
