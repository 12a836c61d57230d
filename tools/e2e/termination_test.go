package e2e_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// withTerminator is the default service list plus the terminator.
func withTerminator() []string {
	return append(append([]string(nil), e2e.Services...), "terminator")
}

// legacyStack starts a stack with the terminator and the v1alpha5 example (spot-only), with
// the Provisioner patched by patch (JSON merge patch of its spec), if given.
func legacyStack(t *testing.T, patch string) *e2e.Stack {
	t.Helper()
	s := e2e.NewStack(t, withTerminator())
	s.Apply("deploy/examples/v1alpha5/default.yaml")
	if patch != "" {
		s.Kubectl("patch", "provisioner", "default", "--type", "merge", "-p", `{"spec":`+patch+`}`)
	}
	return s
}

// deployment applies a Deployment of pause pods; extra is YAML spliced into the pod spec.
func deployment(t *testing.T, s *e2e.Stack, name string, replicas int, cpu, podAnnotations, extra string) {
	t.Helper()
	ann := ""
	if podAnnotations != "" {
		ann = "\n      annotations: " + podAnnotations
	}
	manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
spec:
  replicas: %[2]d
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}%[4]s
    spec:
      terminationGracePeriodSeconds: 0
      containers:
        - name: pause
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {requests: {cpu: %[3]s}}
%[5]s`, name, replicas, cpu, ann, extra)
	applyYAML(t, s, manifest)
}

func applyYAML(t *testing.T, s *e2e.Stack, manifest string) {
	t.Helper()
	path := t.TempDir() + "/manifest.yaml"
	require.NoError(t, writeFile(path, manifest))
	s.Apply(path)
}

// podsByNode counts the live pods of a selector on each node.
func podsByNode(t *testing.T, s *e2e.Stack, selector string) map[string]int {
	t.Helper()
	pods, err := s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out[p.Spec.NodeName]++
		}
	}
	return out
}

// busiestNode is the node running most pods of the selector.
func busiestNode(t *testing.T, s *e2e.Stack, selector string) string {
	t.Helper()
	best, n := "", 0
	for node, c := range podsByNode(t, s, selector) {
		if c > n {
			best, n = node, c
		}
	}
	require.NotEmpty(t, best, "a node runs pods of %s", selector)
	return best
}

func getNode(t *testing.T, s *e2e.Stack, name string) *corev1.Node {
	t.Helper()
	n, err := s.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return n
}

func disrupted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

func instanceOf(n *corev1.Node) string {
	return n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]
}

func claimOfNode(t *testing.T, s *e2e.Stack, node string) *karpv1.NodeClaim {
	t.Helper()
	for _, c := range s.NodeClaims(t) {
		if c.Status.NodeName == node {
			return &c
		}
	}
	return nil
}

func instanceState(t *testing.T, s *e2e.Stack, id string) string {
	t.Helper()
	insts, err := s.Emu.Instances(context.Background())
	require.NoError(t, err)
	for _, i := range insts {
		if i.ID == id {
			return i.State
		}
	}
	return ""
}

// gone waits until a node, its NodeClaim and its instance are gone.
func gone(t *testing.T, s *e2e.Stack, node, instance, claim string, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		if getNode(t, s, node) != nil {
			return false
		}
		for _, c := range s.NodeClaims(t) {
			if c.Name == claim {
				return false
			}
		}
		st := instanceState(t, s, instance)
		return st == "shutting-down" || st == "terminated"
	}, within, 250*time.Millisecond, "node %s, nodeclaim %s and instance %s gone", node, claim, instance)
}

// noLeftovers checks that no node stays cordoned and no instance runs without a node.
func noLeftovers(t *testing.T, s *e2e.Stack) {
	t.Helper()
	nodes, err := s.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	byInstance := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		assert.False(t, disrupted(n), "node %s is left tainted %s", n.Name, karpv1.DisruptedTaintKey)
		if n.Spec.ProviderID != "" {
			byInstance[instanceOf(n)] = true
		}
	}
	insts, err := s.Emu.Instances(context.Background())
	require.NoError(t, err)
	for _, i := range insts {
		if i.State == "running" {
			assert.True(t, byInstance[i.ID], "instance %s runs without a node", i.ID)
		}
	}
}

// The getting-started scale-down with the v1alpha5 example (ttlSecondsAfterEmpty shortened
// to 5s): inflate 5 → 0 → its nodes are cordoned, their instances terminated, Nodes and
// NodeClaims gone; a node that still runs a pod of another Deployment is left alone.
func TestScaleDownEmptyNodesV1Alpha5(t *testing.T) {
	t.Parallel()
	s := legacyStack(t, `{"ttlSecondsAfterEmpty":5}`)
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "5")
	podsRunning(t, s, "app=inflate", 5, 3*time.Minute)
	// keeper may not share a node with inflate, so it gets a node of its own.
	deployment(t, s, "keeper", 1, "500m", "", `      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {matchLabels: {app: inflate}}
              topologyKey: kubernetes.io/hostname`)
	podsRunning(t, s, "app=keeper", 1, 3*time.Minute)
	keeperNode := busiestNode(t, s, "app=keeper")

	type victim struct{ node, instance, claim string }
	var victims []victim
	for node := range podsByNode(t, s, "app=inflate") {
		require.NotEqual(t, keeperNode, node)
		n := getNode(t, s, node)
		require.NotNil(t, n)
		c := claimOfNode(t, s, node)
		require.NotNil(t, c, "node %s has a nodeclaim", node)
		victims = append(victims, victim{node, instanceOf(n), c.Name})
	}
	start := time.Now()
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "0")
	for _, v := range victims {
		gone(t, s, v.node, v.instance, v.claim, 2*time.Minute)
	}
	t.Logf("inflate 5 → 0: %d empty node(s) cordoned, terminated and deleted in %s", len(victims), time.Since(start).Round(100*time.Millisecond))

	assert.Contains(t, s.Service("scheduler").Log(), `"reason":"Empty","action":"Delete"`, "the scheduler decided the empty nodes' removal")
	log := s.Service("terminator").Log()
	// The decision tainted (cordoned) the nodes before it deleted their claims: the terminator
	// finds them tainted already, so it says only what it did itself.
	for _, want := range []string{"terminated instance", "deleted node"} {
		assert.Contains(t, log, want)
	}
	k := getNode(t, s, keeperNode)
	require.NotNil(t, k, "the node running keeper stays")
	assert.False(t, disrupted(k), "and is not cordoned")
	kc := claimOfNode(t, s, keeperNode)
	require.NotNil(t, kc)
	assert.Nil(t, kc.DeletionTimestamp)
	assert.Empty(t, kc.Annotations["fleetwright.io/disruption"], "and never decided on")
	assert.Contains(t, kc.Finalizers, karpv1.TerminationFinalizer, "registered claims carry the termination finalizer")
	assert.Contains(t, k.Finalizers, karpv1.TerminationFinalizer, "and so do their nodes")
	noLeftovers(t, s)
}

// A spot interruption warning injected through the emulator: the node is tainted and drained
// at once, its pods run on replacement capacity well before AWS would take the instance (2
// minutes), and the SQS message is deleted.
func TestSpotInterruptionDrainsAndReplaces(t *testing.T) {
	t.Parallel()
	s := legacyStack(t, "")
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "5")
	podsRunning(t, s, "app=inflate", 5, 3*time.Minute)
	node := busiestNode(t, s, "app=inflate")
	n := getNode(t, s, node)
	require.NotNil(t, n)
	id, claim := instanceOf(n), claimOfNode(t, s, node)
	require.NotNil(t, claim)

	injected := time.Now()
	require.NoError(t, s.Emu.Interrupt(context.Background(), "spot-interruption", id))
	require.Eventually(t, func() bool { n := getNode(t, s, node); return n == nil || disrupted(n) }, 30*time.Second, 100*time.Millisecond, "node tainted")
	tainted := time.Since(injected)
	require.Eventually(t, func() bool { return podsByNode(t, s, "app=inflate")[node] == 0 }, 60*time.Second, 100*time.Millisecond, "node drained")
	drained := time.Since(injected)
	require.Eventually(t, func() bool {
		pods, err := s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=inflate"})
		require.NoError(t, err)
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != node {
				running++
			}
		}
		return running == 5
	}, 2*time.Minute-time.Since(injected), 100*time.Millisecond, "5 pods Running on replacement capacity before the 2-minute termination")
	replaced := time.Since(injected)
	t.Logf("spot interruption → node tainted %s, drained %s; drained → 5 replacement pods Running %s (total %s)",
		tainted.Round(10*time.Millisecond), drained.Round(10*time.Millisecond), (replaced - drained).Round(10*time.Millisecond), replaced.Round(10*time.Millisecond))

	// Replacement capacity was asked for on the warning itself, not once the evicted pods went
	// pending: the scheduler's replacement claim is no younger than the first pod recreated.
	var rep karpv1.NodeClaim
	require.Eventually(t, func() bool {
		for _, c := range s.NodeClaims(t) {
			if c.Annotations[replacesAnnotation] == claim.Name && c.Status.NodeName != "" {
				rep = c
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "a replacement NodeClaim names the interrupted one, and its node registers")
	// The recreated pods were planned onto it: no second node was bought for them.
	assert.Equal(t, map[string]int{rep.Status.NodeName: 5}, podsByNode(t, s, "app=inflate"), "the 5 pods run on the replacement")
	pods, err := s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=inflate"})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if p.CreationTimestamp.Time.After(injected.Add(-time.Second)) {
			assert.False(t, rep.CreationTimestamp.After(p.CreationTimestamp.Time), "replacement %s created %s, pod %s recreated %s",
				rep.Name, rep.CreationTimestamp.Time, p.Name, p.CreationTimestamp.Time)
		}
	}
	// And the interrupted spot offering is avoided: the replacement is not the same offering.
	assert.Contains(t, s.Service("scheduler").Log(), "marked the interrupted offering unavailable")
	if rn := getNode(t, s, rep.Status.NodeName); assert.NotNil(t, rn) {
		assert.False(t, rn.Labels[corev1.LabelInstanceTypeStable] == n.Labels[corev1.LabelInstanceTypeStable] &&
			rn.Labels[corev1.LabelTopologyZone] == n.Labels[corev1.LabelTopologyZone] && rn.Labels[karpv1.CapacityTypeLabelKey] == "spot",
			"the replacement does not land in the interrupted spot offering")
	}

	require.Eventually(t, func() bool {
		calls, err := s.Emu.Calls(context.Background())
		require.NoError(t, err)
		for _, c := range calls {
			if c.Service == "sqs" && c.Action == "DeleteMessage" && c.ErrorCode == "" {
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "the interruption message is deleted from SQS")
	gone(t, s, node, id, claim.Name, time.Minute)
	assert.Contains(t, s.Service("terminator").Log(), "initiating termination for interruption")
	noLeftovers(t, s)
}

// sampler records the most replicas of a selector unavailable at once while it runs.
type sampler struct {
	mu      sync.Mutex
	max     int
	samples int
	stop    chan struct{}
	done    chan struct{}
}

func sampleUnavailable(t *testing.T, s *e2e.Stack, selector string, replicas int) *sampler {
	sm := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(sm.done)
		for {
			select {
			case <-sm.stop:
				return
			default:
			}
			pods, err := s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
			if err == nil {
				ready := 0
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
						ready++
					}
				}
				sm.mu.Lock()
				sm.samples++
				sm.max = max(sm.max, replicas-ready)
				sm.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(sm.finish)
	return sm
}

func (sm *sampler) finish() {
	select {
	case <-sm.stop:
	default:
		close(sm.stop)
	}
	<-sm.done
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pdb applies a PodDisruptionBudget for app=<app>.
func pdb(t *testing.T, s *e2e.Stack, app, maxUnavailable string) {
	applyYAML(t, s, fmt.Sprintf(`apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: %[1]s, namespace: default}
spec:
  maxUnavailable: %[2]s
  selector: {matchLabels: {app: %[1]s}}
`, app, maxUnavailable))
	require.Eventually(t, func() bool {
		b, err := s.Kube.PolicyV1().PodDisruptionBudgets("default").Get(context.Background(), app, metav1.GetOptions{})
		return err == nil && b.Status.ObservedGeneration == b.Generation && b.Status.ExpectedPods > 0
	}, time.Minute, 200*time.Millisecond, "the disruption controller observes the budget")
}

// A 4-replica Deployment with a PDB maxUnavailable 50% on a node being drained never has more
// than 2 replicas unavailable.
func TestDrainRespectsPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	s := legacyStack(t, "")
	deployment(t, s, "web", 4, "500m", "", "")
	podsRunning(t, s, "app=web", 4, 3*time.Minute)
	pdb(t, s, "web", `"50%"`)
	node := busiestNode(t, s, "app=web")
	n := getNode(t, s, node)
	require.NotNil(t, n)
	id, claim := instanceOf(n), claimOfNode(t, s, node)
	require.NotNil(t, claim)
	onNode := podsByNode(t, s, "app=web")[node]

	sm := sampleUnavailable(t, s, "app=web", 4)
	require.NoError(t, s.Emu.Interrupt(context.Background(), "scheduled-change", id))
	gone(t, s, node, id, claim.Name, 3*time.Minute)
	podsRunning(t, s, "app=web", 4, 2*time.Minute)
	sm.finish()
	t.Logf("drained %d web pods under maxUnavailable 50%%: at most %d of 4 unavailable over %d samples", onNode, sm.max, sm.samples)
	assert.GreaterOrEqual(t, sm.samples, 10, "the drain was watched throughout")
	assert.GreaterOrEqual(t, sm.max, 1, "pods were evicted")
	assert.LessOrEqual(t, sm.max, 2, "the PodDisruptionBudget held")
	noLeftovers(t, s)
}

// A do-not-disrupt pod holds back the expiry (and emptiness) of a v1alpha5 Provisioner's node, as
// Karpenter v1alpha5 did (a v1 NodePool's expiry is forceful: TestExpiryIsBoundedByTheGracePeriod),
// but not an interruption drain.
func TestDoNotDisruptBlocksExpiryNotInterruption(t *testing.T) {
	t.Parallel()
	s := legacyStack(t, `{"ttlSecondsAfterEmpty":5,"ttlSecondsUntilExpired":15}`)
	deployment(t, s, "keep", 1, "500m", `{karpenter.sh/do-not-disrupt: "true"}`, "")
	podsRunning(t, s, "app=keep", 1, 3*time.Minute)
	node := busiestNode(t, s, "app=keep")
	n := getNode(t, s, node)
	require.NotNil(t, n)
	id, claim := instanceOf(n), claimOfNode(t, s, node)
	require.NotNil(t, claim)

	require.Eventually(t, func() bool {
		return strings.Contains(s.Service("scheduler").Log(), "expired node not removed (v1alpha5): pod default/keep-")
	}, 90*time.Second, 250*time.Millisecond, "the scheduler finds the node expired and holds back")
	n = getNode(t, s, node)
	require.NotNil(t, n, "the expired node stays")
	assert.False(t, disrupted(n), "untainted")
	c := claimOfNode(t, s, node)
	require.NotNil(t, c)
	assert.Nil(t, c.DeletionTimestamp, "its claim is not being deleted")

	require.NoError(t, s.Emu.Interrupt(context.Background(), "spot-interruption", id))
	gone(t, s, node, id, claim.Name, 2*time.Minute)
	require.Eventually(t, func() bool {
		m := podsByNode(t, s, "app=keep")
		return len(m) == 1 && m[node] == 0
	}, 2*time.Minute, 200*time.Millisecond, "the do-not-disrupt pod was drained by the interruption and runs elsewhere")
	podsRunning(t, s, "app=keep", 1, 2*time.Minute)
}

// Killing the terminator in the middle of a drain and starting it again finishes the job: the
// node and its claim go, its instance is terminated, no node stays cordoned, no instance runs
// without a node.
func TestTerminatorCrashMidDrain(t *testing.T) {
	t.Parallel()
	s := legacyStack(t, "")
	deployment(t, s, "web", 4, "500m", "", "")
	podsRunning(t, s, "app=web", 4, 3*time.Minute)
	pdb(t, s, "web", "1") // one at a time: the drain waits for each replacement
	node := busiestNode(t, s, "app=web")
	n := getNode(t, s, node)
	require.NotNil(t, n)
	id, claim := instanceOf(n), claimOfNode(t, s, node)
	require.NotNil(t, claim)
	before := podsByNode(t, s, "app=web")[node]

	require.NoError(t, s.Emu.Interrupt(context.Background(), "scheduled-change", id))
	require.Eventually(t, func() bool {
		n := getNode(t, s, node)
		return n != nil && disrupted(n) && podsByNode(t, s, "app=web")[node] < before
	}, time.Minute, 50*time.Millisecond, "the drain has begun")
	require.Greater(t, podsByNode(t, s, "app=web")[node], 0, "and is not over")
	t.Logf("killing the terminator with %d of %d web pods still on the node", podsByNode(t, s, "app=web")[node], before)
	killed := restart(t, s, "terminator")

	gone(t, s, node, id, claim.Name, 3*time.Minute)
	podsRunning(t, s, "app=web", 4, 2*time.Minute)
	noLeftovers(t, s)
	// The drain went on: the replacement of the first pod the restarted terminator evicted. (An
	// eviction before the kill is replaced within a second; creation times are whole seconds.)
	resumed := firstCreatedAfter(t, s, "app=web", killed.Truncate(time.Second).Add(2*time.Second))
	require.False(t, resumed.IsZero(), "a pod evicted after the kill was replaced")
	resumedWithin(t, "terminator", killed.Truncate(time.Second), resumed)
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
