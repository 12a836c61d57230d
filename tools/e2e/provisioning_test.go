package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/tools/awsemu"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// podsRunning waits until n pods matching the selector run, and returns how long it took.
func podsRunning(t *testing.T, s *e2e.Stack, selector string, n int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	require.Eventually(t, func() bool {
		pods, err := s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n
	}, within, 200*time.Millisecond, "%d pods %s running", n, selector)
	return time.Since(start)
}

// nominations returns each pod's latest nomination as the NodeClaims record it, by pod UID.
func nominations(t *testing.T, s *e2e.Stack) map[string]podproj.PodNomination {
	t.Helper()
	out := map[string]podproj.PodNomination{}
	claims := s.NodeClaims(t)
	for i := range claims {
		for _, n := range podproj.NominationsOn(&claims[i]) {
			if cur, ok := out[n.UID]; !ok || n.Supersedes(cur) {
				out[n.UID] = n
			}
		}
	}
	return out
}

func launchedNodes(t *testing.T, s *e2e.Stack) []corev1.Node {
	t.Helper()
	var list corev1.NodeList
	require.NoError(t, s.Client.List(context.Background(), &list, client.HasLabels{karpv1.NodePoolLabelKey}))
	return list.Items
}

// planCost is the hourly price of the launched nodes, as the scheduler saw it: the stack's
// region's on-demand price, or the (modelled) spot price of the node's zone.
func planCost(t *testing.T, s *e2e.Stack) float64 {
	t.Helper()
	total := 0.0
	for _, n := range launchedNodes(t, s) {
		name := n.Labels[corev1.LabelInstanceTypeStable]
		if n.Labels[karpv1.CapacityTypeLabelKey] == "spot" {
			total += s.SpotPrice(name, n.Labels[corev1.LabelTopologyZone])
		} else {
			total += s.OnDemandPrice(name)
		}
	}
	return total
}

// everyNodeUsed checks that no launched node is without a workload pod.
func everyNodeUsed(t *testing.T, s *e2e.Stack) {
	t.Helper()
	pods, err := s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	used := map[string]bool{}
	for _, p := range pods.Items {
		used[p.Spec.NodeName] = true
	}
	for _, n := range launchedNodes(t, s) {
		assert.True(t, used[n.Name], "node %s (%s) runs no pod: a node was launched that was not needed", n.Name, n.Labels[corev1.LabelInstanceTypeStable])
	}
}

func podEvents(t *testing.T, s *e2e.Stack, reason string) []string {
	t.Helper()
	evs, err := s.Kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	require.NoError(t, err)
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "Pod" {
			out = append(out, e.Message)
		}
	}
	return out
}

// hasTypeLabels checks that a launched node carries Karpenter's full label set for its
// instance type and offering, computed from the catalog as Karpenter would, and no empty value.
func hasTypeLabels(t *testing.T, n corev1.Node) {
	t.Helper()
	it, ok := catalog.Lookup(n.Labels[corev1.LabelInstanceTypeStable])
	require.True(t, ok, "node %s has a catalog instance type", n.Name)
	for k, v := range scheduling.TypeLabels(it) {
		assert.Equal(t, v, n.Labels[k], "node %s (%s): label %s", n.Name, it.Name, k)
	}
	for _, k := range []string{karpv1.NodePoolLabelKey, karpv1.CapacityTypeLabelKey, corev1.LabelTopologyZone, "topology.k8s.aws/zone-id"} {
		assert.NotEmpty(t, n.Labels[k], "node %s: label %s", n.Name, k)
	}
	for k, v := range n.Labels {
		assert.NotEmpty(t, v, "node %s: label %s is empty", n.Name, k)
	}
}

// landsOnExistingNode creates a small pod that selects the instance generation of an existing
// node (a label only Karpenter's full set carries) and checks that it runs there, with no
// NodeClaim launched for it.
func landsOnExistingNode(t *testing.T, s *e2e.Stack) {
	t.Helper()
	ctx := context.Background()
	before := len(s.NodeClaims(t))
	node := launchedNodes(t, s)[0]
	gen := node.Labels[scheduling.LabelInstanceGeneration]
	require.NotEmpty(t, gen)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "by-generation", Namespace: "default", Labels: map[string]string{"app": "by-generation"}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{scheduling.LabelInstanceGeneration: gen},
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}}},
		},
	}
	_, err := s.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	podsRunning(t, s, "app=by-generation", 1, time.Minute)
	got, err := s.Kube.CoreV1().Pods("default").Get(ctx, "by-generation", metav1.GetOptions{})
	require.NoError(t, err)
	landed := false
	for _, n := range launchedNodes(t, s) {
		landed = landed || n.Name == got.Spec.NodeName
	}
	assert.True(t, landed, "the pod selecting %s=%s runs on a node launched before it (%s)", scheduling.LabelInstanceGeneration, gen, got.Spec.NodeName)
	assert.Len(t, s.NodeClaims(t), before, "no NodeClaim was made for a pod an existing node could take")
}

// The getting-started scale-up with the v1 example: 5 pods pending → NodeClaims →
// instances → nodes that carry the pool's labels and taints → 5 pods Running, on as few
// nodes as fit.
func TestScaleUpV1(t *testing.T) {
	t.Parallel()
	s := e2e.NewStack(t, nil)
	s.Apply("deploy/examples/v1/default.yaml")
	// The pool's own label and taint must reach the nodes; inflate tolerates the taint.
	s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p",
		`{"spec":{"template":{"metadata":{"labels":{"team":"web"}},"spec":{"taints":[{"key":"example.com/dedicated","value":"web","effect":"NoSchedule"}]}}}}`)
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("patch", "deployment", "inflate", "--type", "merge", "-p",
		`{"spec":{"template":{"spec":{"tolerations":[{"key":"example.com/dedicated","operator":"Equal","value":"web","effect":"NoSchedule"}]}}}}`)

	s.Kubectl("scale", "deployment", "inflate", "--replicas", "5")
	took := podsRunning(t, s, "app=inflate", 5, 3*time.Minute)
	t.Logf("5 pods created → all Running in %s", took.Round(100*time.Millisecond))

	claims := s.NodeClaims(t)
	// The pool allows t4g.medium/large/xlarge: five 1-CPU pods fit 2 × t4g.xlarge (3 + 2), or
	// 5 × t4g.medium, which costs less. Whatever the plan, it costs no more than the first.
	assert.LessOrEqual(t, planCost(t, s), 2*s.OnDemandPrice("t4g.xlarge"), "no dearer than 2 × t4g.xlarge")
	everyNodeUsed(t, s)
	// Pods may run as soon as a node is Ready; the launcher marks its claim Initialized on its
	// next pass.
	require.Eventually(t, func() bool {
		for _, c := range s.NodeClaims(t) {
			if !c.IsTrue(karpv1.ConditionTypeInitialized) {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "every NodeClaim reaches Initialized")
	for _, c := range claims {
		assert.Equal(t, "default", c.Labels[karpv1.NodePoolLabelKey])
	}
	nodes := launchedNodes(t, s)
	require.Len(t, nodes, len(claims))
	for _, n := range nodes {
		assert.Equal(t, "default", n.Labels[karpv1.NodePoolLabelKey])
		assert.Contains(t, []string{"spot", "on-demand"}, n.Labels[karpv1.CapacityTypeLabelKey])
		assert.True(t, strings.HasPrefix(n.Labels[corev1.LabelInstanceTypeStable], "t4g."), n.Labels[corev1.LabelInstanceTypeStable])
		assert.Equal(t, "us-east-1a", n.Labels[corev1.LabelTopologyZone])
		assert.Equal(t, "arm64", n.Labels[corev1.LabelArchStable])
		assert.Equal(t, "web", n.Labels["team"], "the pool's label")
		assert.Contains(t, n.Spec.Taints, corev1.Taint{Key: "example.com/dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}, "the pool's taint")
		hasTypeLabels(t, n)
	}
	assert.NotEmpty(t, podEvents(t, s, "Nominated"), "pods were told which NodeClaim they wait for")

	oneInstancePerClaim(t, s)
	landsOnExistingNode(t, s)
}

// The same with the v1alpha5 example: a spot-only Provisioner and an AWSNodeTemplate.
func TestScaleUpV1Alpha5(t *testing.T) {
	t.Parallel()
	s := e2e.NewStack(t, nil)
	s.Apply("deploy/examples/v1alpha5/default.yaml")
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "5")
	took := podsRunning(t, s, "app=inflate", 5, 3*time.Minute)
	t.Logf("v1alpha5: 5 pods created → all Running in %s", took.Round(100*time.Millisecond))

	everyNodeUsed(t, s)
	for _, n := range launchedNodes(t, s) {
		assert.Equal(t, "spot", n.Labels[karpv1.CapacityTypeLabelKey], "the provisioner is spot-only")
		assert.Equal(t, "default", n.Labels["karpenter.sh/provisioner-name"])
		assert.Equal(t, "amd64", n.Labels[corev1.LabelArchStable], "Karpenter's default arch")
		assert.Regexp(t, `^[cmr]\d`, n.Labels[corev1.LabelInstanceTypeStable], "Karpenter's default categories")
		hasTypeLabels(t, n)
	}
	// No second node where one suffices: the plan costs no more than the cheapest single
	// default-category spot node in us-east-1a with room for all five pods (8 vCPU, 16 GiB).
	cheapestSingle := 0.0
	for _, it := range catalog.Schedulable() {
		if it.VCPU >= 8 && it.MemoryMiB >= 16384 && it.Arch == "amd64" && it.Generation > 2 && strings.Contains("cmr", it.Category) && !it.BareMetal {
			if p, ok := catalog.ModelledSpotPrice(s.Region(), it.Name, "us-east-1a", 0); ok && (cheapestSingle == 0 || p < cheapestSingle) {
				cheapestSingle = p
			}
		}
	}
	assert.LessOrEqual(t, planCost(t, s), cheapestSingle+1e-9, "no dearer than one node that fits all")
	landsOnExistingNode(t, s)
}

// No pool at all: the pods stay pending and are told why; a pool whose taint they do not
// tolerate: the event names the taint.
func TestUnschedulablePodsAreExplained(t *testing.T) {
	t.Parallel()
	s := e2e.NewStack(t, nil)
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "2")
	require.Eventually(t, func() bool {
		for _, m := range podEvents(t, s, "FailedScheduling") {
			if strings.Contains(m, "no NodePool exists") {
				return true
			}
		}
		return false
	}, 90*time.Second, 250*time.Millisecond, "a FailedScheduling event says no NodePool exists")
	assert.Contains(t, s.Service("scheduler").Log(), "no NodePool exists", "and the log says so")
	assert.Empty(t, s.NodeClaims(t))

	s.Apply("deploy/examples/v1/default.yaml")
	s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p",
		`{"spec":{"template":{"spec":{"taints":[{"key":"example.com/special-taint","effect":"NoSchedule"}]}}}}`)
	require.Eventually(t, func() bool {
		for _, m := range podEvents(t, s, "FailedScheduling") {
			if strings.Contains(m, "example.com/special-taint") {
				return true
			}
		}
		return false
	}, 90*time.Second, 250*time.Millisecond, "the event names the taint the pods do not tolerate")
	assert.Empty(t, s.NodeClaims(t), "no capacity for pods no pool can take")
}

// Every spot pool of the zone out of capacity: the launch still succeeds (on-demand), the
// exhausted offerings are published, and the next claim goes straight to what is available.
func TestInsufficientCapacity(t *testing.T) {
	t.Parallel()
	s := e2e.NewStack(t, nil)
	ctx := context.Background()
	require.NoError(t, s.Emu.SetCapacity(ctx, awsemu.CapacityRule{Pool: awsemu.Pool{Zone: "us-east-1a", CapacityType: "spot"}, Capacity: 0}))
	s.Apply("deploy/examples/v1/default.yaml")
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "1")
	podsRunning(t, s, "app=inflate", 1, 3*time.Minute)
	nodes := launchedNodes(t, s)
	require.Len(t, nodes, 1)
	assert.Equal(t, "on-demand", nodes[0].Labels[karpv1.CapacityTypeLabelKey], "fell through to the next offering")
	assert.Contains(t, s.Service("launcher").Log(), "marked offering unavailable")

	fleets := func() int { return s.Calls(t, "CreateFleet") }
	before := fleets()
	// A pod too big for the first node needs a second claim.
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "6")
	podsRunning(t, s, "app=inflate", 6, 3*time.Minute)
	// The claims that launched (the first one failed on the exhausted pools; no terminator runs
	// here to release its finalizer, so it stays, being deleted).
	launched := 0
	for _, nc := range s.NodeClaims(t) {
		if nc.IsTrue(karpv1.ConditionTypeLaunched) {
			launched++
		}
	}
	assert.Equal(t, before+launched-1, fleets(), "each later claim launched in one CreateFleet: no exhausted pool was tried again")
	for _, n := range launchedNodes(t, s) {
		assert.Equal(t, "on-demand", n.Labels[karpv1.CapacityTypeLabelKey])
	}
}

// The launcher is down when the intent is published, and killed again as it calls
// CreateFleet: after restarts there is exactly one instance for each NodeClaim.
func TestLauncherCrashLaunchesExactlyOnce(t *testing.T) {
	t.Parallel()
	s := e2e.NewStack(t, nil)
	// Once the catalog is out (the scheduler needs it), take the launcher down.
	require.Eventually(t, func() bool { return strings.Contains(s.Service("launcher").Log(), "published instance catalog") },
		60*time.Second, 100*time.Millisecond)
	s.Service("launcher").Kill()
	s.Apply("deploy/examples/v1/default.yaml")
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "3")
	require.Eventually(t, func() bool { return len(s.NodeClaims(t)) > 0 }, 90*time.Second, 200*time.Millisecond, "the scheduler created claims")

	// Restart, and kill it as soon as its first CreateFleet is seen.
	s.StartService("launcher")
	require.Eventually(t, func() bool { return s.Calls(t, "CreateFleet") > 0 }, 60*time.Second, 5*time.Millisecond)
	s.Service("launcher").Kill()
	s.StartService("launcher")
	podsRunning(t, s, "app=inflate", 3, 3*time.Minute)
	require.NotEmpty(t, s.NodeClaims(t))
	oneInstancePerClaim(t, s)
}
