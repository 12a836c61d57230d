package e2e_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// Issue 17: kube-scheduler does not read Fleetwright's nominations, so when a big node
// registers it takes whichever pending pods it likes, pods planned for another claim among
// them. The pods planned for the big node then no longer fit there; their nomination must end
// and they must be offered again, or they stay Pending forever.

const bigPods = "app=big"

// TestLargeDeploymentAllRun: a wide pool and one Deployment scaled 0 → 500.
func TestLargeDeploymentAllRun(t *testing.T) {
	t.Parallel()
	s := wideStack(t)
	start := time.Now()
	scaleBig(t, s, 500)
	allRunning(t, s, 500, 8*time.Minute)
	reportFleet(t, s, 500, time.Since(start))
}

// TestLargeDeploymentScaledInTwoSteps: 0 → 200, then → 500 while the first nodes are still
// registering, so the second batch is planned against in-flight claims and nodes that are
// filling up.
func TestLargeDeploymentScaledInTwoSteps(t *testing.T) {
	t.Parallel()
	s := wideStack(t)
	start := time.Now()
	scaleBig(t, s, 200)
	require.Eventually(t, func() bool { return len(s.NodeClaims(t)) > 0 }, 2*time.Minute, 50*time.Millisecond,
		"the first NodeClaims are created")
	registered := 0
	for _, c := range s.NodeClaims(t) {
		if c.IsTrue(karpv1.ConditionTypeInitialized) {
			registered++
		}
	}
	t.Logf("scaling to 500 with %d claim(s) out, %d initialized", len(s.NodeClaims(t)), registered)
	scaleBig(t, s, 500)
	allRunning(t, s, 500, 8*time.Minute)
	reportFleet(t, s, 500, time.Since(start))
}

// wideStack is a stack with the wide pool and the big Deployment at zero replicas.
func wideStack(t *testing.T) *e2e.Stack {
	s := e2e.NewStack(t, nil)
	s.Apply("tools/e2e/testdata/wide-pool.yaml")
	createBig(t, s)
	return s
}

// createBig creates the Deployment the user made with
// `kubectl create deployment big --image=pause`, requests 250m / 256Mi, at zero replicas.
func createBig(t *testing.T, s *e2e.Stack) {
	t.Helper()
	labels := map[string]string{"app": "big"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(0)),
					Containers: []corev1.Container{{Name: "pause", Image: "pause", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					}}},
				},
			},
		},
	}
	_, err := s.Kube.AppsV1().Deployments("default").Create(context.Background(), d, metav1.CreateOptions{})
	require.NoError(t, err)
}

func scaleBig(t *testing.T, s *e2e.Stack, n int) {
	t.Helper()
	s.Kubectl("scale", "deployment", "big", "--replicas", fmt.Sprint(n))
}

// allRunning waits until n pods of the Deployment run, logging progress every 15 s; if they do
// not, it says where the others are stuck.
func allRunning(t *testing.T, s *e2e.Stack, n int, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(within)
	lastLog := time.Now()
	for {
		pods, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: bigPods})
		require.NoError(t, err)
		running, pending, nominated := 0, 0, map[string]int{}
		noms := nominations(t, s)
		for _, p := range pods.Items {
			switch {
			case p.Status.Phase == corev1.PodRunning:
				running++
			case p.Spec.NodeName == "":
				pending++
				if n, ok := noms[string(p.UID)]; ok {
					nominated[n.Claim]++
				}
			}
		}
		if running == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pods Running after %s; %d pending, nominated to claims: %v; claims: %s",
				running, n, within, pending, nominated, claimSummary(t, s))
		}
		if time.Since(lastLog) > 15*time.Second {
			t.Logf("%d/%d Running, %d pending (nominated: %v), %d claim(s)", running, n, pending, nominated, len(s.NodeClaims(t)))
			lastLog = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func claimSummary(t *testing.T, s *e2e.Stack) string {
	var out []string
	for _, c := range s.NodeClaims(t) {
		out = append(out, fmt.Sprintf("%s(%s, node %q, initialized %v)", c.Name, c.Labels[corev1.LabelInstanceTypeStable],
			c.Status.NodeName, c.IsTrue(karpv1.ConditionTypeInitialized)))
	}
	return strings.Join(out, ", ")
}

// reportFleet logs what the scale-up cost against a fresh Solve of the same pods on an empty
// cluster, and checks that no capacity was launched that runs nothing and that the fleet is not
// wildly dearer than the one-shot plan (re-offered pods each on a node of their own would be).
func reportFleet(t *testing.T, s *e2e.Stack, n int, took time.Duration) {
	t.Helper()
	everyNodeUsed(t, s)
	nodes := launchedNodes(t, s)
	types := map[string]int{}
	for _, node := range nodes {
		types[node.Labels[corev1.LabelInstanceTypeStable]]++
	}
	cost := planCost(t, s)

	pods := make([]scheduling.Pod, n)
	for i := range pods {
		pods[i] = scheduling.Pod{UID: fmt.Sprintf("pod-%04d", i), Namespace: "default", Name: fmt.Sprintf("big-%04d", i),
			Requests: scheduling.ResourceList{scheduling.ResourceCPU: 250, scheduling.ResourceMemory: 256 * scheduling.MiB, scheduling.ResourcePods: 1}}
	}
	plan, err := scheduling.Solve(scheduling.Input{
		Pods:          pods,
		InstanceTypes: scheduling.FromCatalog(catalog.Schedulable(), []string{"us-east-1a", "us-east-1b", "us-east-1c"}),
		NodePools: []scheduling.NodePool{{Name: "wide", Limits: scheduling.ResourceList{scheduling.ResourceCPU: 100000 * 1000},
			Requirements: []scheduling.Requirement{{Key: scheduling.LabelCapacityType, Operator: scheduling.OpIn, Values: []string{"on-demand"}}}}},
	})
	require.NoError(t, err)
	require.Empty(t, plan.Unschedulable)
	fresh := map[string]int{}
	for _, c := range plan.NodeClaims {
		fresh[c.InstanceTypes[0]]++
	}
	t.Logf("%d pods Running %s after the scale-up on %d node(s) %v at $%.4f/h; a fresh Solve of the same pods: %d node(s) %v at $%.4f/h (ratio %.2f)",
		n, took.Round(100*time.Millisecond), len(nodes), sortedCounts(types), cost, len(plan.NodeClaims), sortedCounts(fresh), plan.CostUSDPerHour(), cost/plan.CostUSDPerHour())
	assert.LessOrEqual(t, cost, 2*plan.CostUSDPerHour(), "the fleet costs at most twice a fresh plan of the same pods")
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
