package e2e_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// Disruption that is safe by construction (issue 25), each unsafe point of the issue played on a
// stack whose instances boot in 30 s, as EC2's do: nothing lands on a node once it is decided
// on, the grace period counts from the deletion, one budget for every reason, a decision given
// up is never carried out, a node stuck behind a PodDisruptionBudget holds no other pool back,
// and expiry is bounded by terminationGracePeriod. The tests wait mostly on boots, so they run
// side by side.

const slowBoot = 30 * time.Second

// safetyStack starts a stack with the terminator and the v1 example pool, patched (JSON merge
// patch of its spec), its instances booting in slowBoot.
func safetyStack(t *testing.T, patch string, opt e2e.Options) *e2e.Stack {
	t.Helper()
	opt.Services, opt.BootDelay = withTerminator(), slowBoot
	s := e2e.NewStackWith(t, opt)
	s.Apply("deploy/examples/v1/default.yaml")
	if patch != "" {
		s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p", `{"spec":`+patch+`}`)
	}
	return s
}

// workload applies a Deployment of pause pods with the CPU request, pod grace period and extra
// pod spec lines (indented for spec:), and optional pod annotations.
func workload(t *testing.T, s *e2e.Stack, ns, name string, replicas int, cpu string, grace int, annotations, extra string) {
	t.Helper()
	if annotations != "" {
		annotations = "\n      annotations: " + annotations
	}
	applyYAML(t, s, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[6]s}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata:
      labels: {app: %[1]s}%[5]s
    spec:
      terminationGracePeriodSeconds: %[4]d
      containers:
        - name: pause
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {requests: {cpu: %[3]s}}
%[7]s`, name, replicas, cpu, grace, annotations, ns, extra))
}

// podNodes names the nodes of the selector's pods, Running or not, in the namespace.
func podNodes(t *testing.T, s *e2e.Stack, ns, selector string) map[string]string {
	t.Helper()
	pods, err := s.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = p.Spec.NodeName
	}
	return out
}

// onlyClaim waits for the pool's one initialized claim and returns it.
func onlyClaim(t *testing.T, s *e2e.Stack) karpv1.NodeClaim {
	t.Helper()
	var c karpv1.NodeClaim
	require.Eventually(t, func() bool {
		claims := s.NodeClaims(t)
		if len(claims) != 1 || !claims[0].IsTrue(karpv1.ConditionTypeInitialized) {
			return false
		}
		c = claims[0]
		return true
	}, 3*time.Minute, 250*time.Millisecond, "one initialized NodeClaim")
	return c
}

// decidedOn waits until a decision is recorded on the claim and returns it.
func decidedOn(t *testing.T, s *e2e.Stack, claim string, within time.Duration) disruption.Decision {
	t.Helper()
	var d disruption.Decision
	require.Eventually(t, func() bool {
		for _, c := range s.NodeClaims(t) {
			if c.Name == claim {
				var ok bool
				d, ok, _ = disruption.DecisionOf(&c)
				return ok
			}
		}
		return false
	}, within, 250*time.Millisecond, "a disruption decision recorded on %s", claim)
	return d
}

// claimGone waits until no NodeClaim of the name is left.
func claimGone(t *testing.T, s *e2e.Stack, claim string, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, c := range s.NodeClaims(t) {
			if c.Name == claim {
				return false
			}
		}
		return true
	}, within, time.Second, "nodeclaim %s gone", claim)
}

// driftPool changes the pool's template: every claim made before is drifted (NodePoolDrifted).
func driftPool(s *e2e.Stack, value string) {
	s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p",
		`{"spec":{"template":{"metadata":{"labels":{"rollout":"`+value+`"}}}}}`)
}

// A node decided on takes no new pod: pods created after the decision to replace it (its
// replacement still booting) are not bound to it, though it has room; they wait for the
// replacement. Before, the taint came only once the replacement was initialized, and six pods
// created meanwhile were all bound to the old node, then evicted.
func TestNoPodLandsOnANodeDecidedOn(t *testing.T) {
	t.Parallel()
	s := safetyStack(t, `{"disruption":{"consolidateAfter":"Never"}}`, e2e.Options{})
	workload(t, s, "default", "web", 1, "500m", 0, "", "")
	podsRunning(t, s, "app=web", 1, 3*time.Minute)
	old := onlyClaim(t, s)

	driftPool(s, "1")
	decidedOn(t, s, old.Name, 2*time.Minute)
	workload(t, s, "default", "late", 6, "100m", 0, "", "")
	var mu sync.Mutex
	landed := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			for pod, node := range podNodes(t, s, "default", "app=late") {
				if node == old.Status.NodeName {
					mu.Lock()
					landed[pod] = true
					mu.Unlock()
				}
			}
		}
	})
	podsRunning(t, s, "app=late", 6, 3*time.Minute)
	claimGone(t, s, old.Name, 3*time.Minute)
	close(stop)
	wg.Wait()
	assert.Empty(t, landed, "pods bound to node %s after the decision to replace it", old.Status.NodeName)
}

// A drift with terminationGracePeriod 20 s, instances booting in 30 s: the grace period counts
// from the NodeClaim's deletion, once the replacement is initialized, not from the decision, so
// the drain evicts through the Eviction API and the PodDisruptionBudget holds; no pod is deleted
// with a grace period of 0. Before, the drain started past its deadline and both pods were
// deleted at once.
func TestDriftCountsGraceFromDeletion(t *testing.T) {
	t.Parallel()
	s := safetyStack(t, `{"template":{"spec":{"terminationGracePeriod":"20s"}},"disruption":{"consolidateAfter":"Never"}}`, e2e.Options{})
	workload(t, s, "default", "guarded", 2, "500m", 5, "", "")
	applyYAML(t, s, `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: guarded, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: guarded}}
`)
	podsRunning(t, s, "app=guarded", 2, 3*time.Minute)
	old := onlyClaim(t, s)

	graceless, violations := watchDeletions(t, s, "app=guarded")
	driftPool(s, "1")
	claimGone(t, s, old.Name, 4*time.Minute)
	podsRunning(t, s, "app=guarded", 2, 2*time.Minute)
	assert.Empty(t, graceless(), "pods deleted with a grace period of 0")
	assert.Empty(t, violations(), "PodDisruptionBudget violated")
}

// watchDeletions follows the selector's pods until the test ends: the pods deleted without a
// grace period (gone with no deletion timestamp seen first, or deleted with 0 s), and every
// moment the invariants saw a PodDisruptionBudget broken.
func watchDeletions(t *testing.T, s *e2e.Stack, selector string) (graceless, violations func() []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var mu sync.Mutex
	var bad, broken []string
	graceful := map[string]bool{}
	w, err := s.Kube.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			switch {
			case ev.Type == watch.Modified && p.DeletionTimestamp != nil && !graceful[p.Name]:
				// The first deletion is the drain's; kwok (the kubelet here) then removes the pod
				// with grace 0 itself, as a kubelet does once its containers stopped.
				if g := p.DeletionGracePeriodSeconds; g != nil && *g == 0 && p.Spec.TerminationGracePeriodSeconds != nil && *p.Spec.TerminationGracePeriodSeconds > 0 {
					bad = append(bad, p.Name+" (deleted with grace 0)")
				}
				graceful[p.Name] = true
			case ev.Type == watch.Deleted && !graceful[p.Name] && p.DeletionTimestamp == nil:
				bad = append(bad, p.Name+" (gone at once)")
			}
			mu.Unlock()
		}
	}()
	go func() {
		for ctx.Err() == nil {
			vs, err := e2e.Violations(ctx, s.Client, s.Emu, e2e.InvariantOptions{GCWindow: time.Hour})
			if err == nil {
				for _, v := range vs {
					if v.Kind == e2e.PDBViolated {
						mu.Lock()
						broken = append(broken, v.Detail)
						mu.Unlock()
					}
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	get := func(l *[]string) func() []string {
		return func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), *l...)
		}
	}
	return get(&bad), get(&broken)
}

// Empty nodes and drifted nodes at once under a budget of one node: one ledger counts both
// reasons, so never two of the pool's nodes are disrupting at once. Before, emptiness (decided in
// the terminator) and drift (in the scheduler) each counted against the budget their own way.
func TestOneBudgetForEmptyAndDrifted(t *testing.T) {
	t.Parallel()
	s := safetyStack(t, `{"disruption":{"consolidationPolicy":"WhenEmpty","consolidateAfter":"5s","budgets":[{"nodes":"1"}]}}`, e2e.Options{})
	deployment(t, s, "spread", 3, "500m", "", `      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {matchLabels: {app: spread}}
              topologyKey: kubernetes.io/hostname`)
	podsRunning(t, s, "app=spread", 3, 4*time.Minute)
	var old []string
	for _, c := range s.NodeClaims(t) {
		old = append(old, c.Name)
	}
	require.Len(t, old, 3)

	var mu sync.Mutex
	most := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			d := disruptingNodes(t, s)
			mu.Lock()
			if len(d) > most {
				most = len(d)
				t.Logf("%d disrupting: %v", len(d), d)
			}
			mu.Unlock()
		}
	})
	s.Kubectl("scale", "deployment", "spread", "--replicas", "1")
	driftPool(s, "1")
	for _, c := range old {
		claimGone(t, s, c, 8*time.Minute)
	}
	close(stop)
	wg.Wait()
	assert.LessOrEqual(t, most, 1, "never more than one node disrupting under a budget of one")
	podsRunning(t, s, "app=spread", 1, time.Minute)
}

// A decision given up — its replacement not initialized within --replacement-timeout — is never
// carried out: the old node is untainted, never drained, its claim never deleted, its pod never
// evicted, and the events say why. The hand-over to the terminator is the claim's deletion, which
// an abandoned decision never reaches.
func TestAbandonedDecisionIsNeverCarriedOut(t *testing.T) {
	t.Parallel()
	opt := e2e.Options{ServiceArgs: map[string][]string{"scheduler": {"--replacement-timeout", "20s"}}}
	s := safetyStack(t, `{"disruption":{"consolidateAfter":"Never"}}`, opt)
	workload(t, s, "default", "web", 1, "500m", 0, "", "")
	podsRunning(t, s, "app=web", 1, 3*time.Minute)
	old := onlyClaim(t, s)
	pods := podNodes(t, s, "default", "app=web")

	driftPool(s, "1")
	decidedOn(t, s, old.Name, 2*time.Minute)
	require.Eventually(t, func() bool {
		evs, err := s.Kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + old.Name + ",reason=DisruptionAbandoned"})
		return err == nil && len(evs.Items) > 0 && strings.Contains(evs.Items[0].Message, "not initialized within 20s")
	}, 2*time.Minute, 250*time.Millisecond, "the decision is abandoned: its replacement boots in 30 s")
	for range 30 { // and stays so while the next attempts are made and given up
		for _, c := range s.NodeClaims(t) {
			require.False(t, c.Name == old.Name && c.DeletionTimestamp != nil, "nodeclaim %s deleted", old.Name)
		}
		time.Sleep(time.Second)
	}
	assert.Equal(t, pods, podNodes(t, s, "default", "app=web"), "the pod was never evicted")
}

// A drift whose replacement registers but never initializes (a startup taint nothing lifts) is
// abandoned, and the replacement is kept, as Karpenter keeps it; no later pass then moves the old
// node's pod onto that node, which may never be ready for it: the old claim stays, its pod where
// it was, and an event on it says why (Karpenter's "Drift Failure … registers but never
// initialized"; before, the replacement was deleted, and a kept one drew the old node's pods).
func TestDriftNeverMovesPodsOntoAnUninitializedNode(t *testing.T) {
	t.Parallel()
	opt := e2e.Options{ServiceArgs: map[string][]string{"scheduler": {"--replacement-timeout", "75s"}}}
	s := safetyStack(t, `{"disruption":{"consolidateAfter":"Never"}}`, opt)
	workload(t, s, "default", "web", 1, "500m", 0, "", "")
	podsRunning(t, s, "app=web", 1, 3*time.Minute)
	old := onlyClaim(t, s)
	pods := podNodes(t, s, "default", "app=web")

	s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p",
		`{"spec":{"template":{"spec":{"startupTaints":[{"key":"example.com/never","effect":"PreferNoSchedule"}]}}}}`)
	decidedOn(t, s, old.Name, 2*time.Minute)
	events := func(reason, text string) bool {
		evs, err := s.Kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + old.Name + ",reason=" + reason})
		require.NoError(t, err)
		for _, e := range evs.Items {
			if strings.Contains(e.Message, text) {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return events("DisruptionAbandoned", "not initialized within 1m15s") },
		3*time.Minute, time.Second, "the decision is abandoned: its replacement never initializes")
	var kept []string
	for _, c := range s.NodeClaims(t) {
		if c.Name != old.Name {
			require.NotEmpty(t, c.Status.NodeName, "the abandoned replacement had registered")
			require.Nil(t, c.DeletionTimestamp, "the registered replacement is kept")
			kept = append(kept, c.Name)
		}
	}
	require.Len(t, kept, 1, "one replacement, kept")

	require.Eventually(t, func() bool { return events("DisruptionBlocked", "not initialized yet") },
		time.Minute, time.Second, "the next pass says why the old node is not disrupted")
	for range 30 {
		for _, c := range s.NodeClaims(t) {
			require.False(t, c.Name == old.Name && c.DeletionTimestamp != nil, "nodeclaim %s deleted: its pod would move to a node never initialized", old.Name)
		}
		time.Sleep(time.Second)
	}
	assert.Equal(t, pods, podNodes(t, s, "default", "app=web"), "the pod was never moved")
}

// A node whose drain is stuck behind a PodDisruptionBudget holds no other pool's consolidation
// back. Pool "held" has a node whose pod is covered by a budget with an empty selector ({}: every
// pod of its namespace) allowing no disruption: it is not consolidated (before, the empty
// selector was skipped, the node was decided on, and its stuck drain held every consolidation in
// the cluster for up to 10 minutes); deleted by hand, it drains forever. Meanwhile pool "free"
// consolidates.
func TestStuckNodeHoldsNoOtherPoolBack(t *testing.T) {
	t.Parallel()
	s := safetyStack(t, "", e2e.Options{})
	s.Kubectl("delete", "nodepool", "default")
	for _, pool := range []string{"held", "free"} {
		applyYAML(t, s, `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: `+pool+`}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [t4g]}
        - {key: karpenter.k8s.aws/instance-cpu, operator: In, values: ["2", "4"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
        - {key: kubernetes.io/arch, operator: In, values: [arm64]}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 10s}
`)
		s.Kubectl("create", "namespace", pool)
		sel := "      nodeSelector: {karpenter.sh/nodepool: " + pool + "}"
		// A big pod buys a 4-CPU node, a small one joins it; the big one leaves, and the node is
		// worth replacing with a 2-CPU one.
		workload(t, s, pool, "big", 1, "2500m", 0, "", sel)
		workload(t, s, pool, "small", 1, "100m", 0, "", sel)
	}
	applyYAML(t, s, `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: everything, namespace: held}
spec:
  maxUnavailable: 0
  selector: {}
`)
	for _, pool := range []string{"held", "free"} {
		require.Eventually(t, func() bool {
			pods, err := s.Kube.CoreV1().Pods(pool).List(context.Background(), metav1.ListOptions{})
			if err != nil || len(pods.Items) != 2 {
				return false
			}
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning {
					return false
				}
			}
			return true
		}, 4*time.Minute, time.Second, "pool %s's two pods Running", pool)
	}
	claimOf := func(pool string) karpv1.NodeClaim {
		for _, c := range s.NodeClaims(t) {
			if c.Labels[karpv1.NodePoolLabelKey] == pool {
				return c
			}
		}
		t.Fatalf("no nodeclaim of pool %s", pool)
		return karpv1.NodeClaim{}
	}
	held, free := claimOf("held"), claimOf("free")

	s.Kubectl("-n", "held", "delete", "deployment", "big")
	require.Eventually(t, func() bool {
		evs, err := s.Kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + held.Name})
		if err != nil {
			return false
		}
		for _, ev := range evs.Items {
			if (ev.Reason == "Unconsolidatable" || ev.Reason == "DisruptionBlocked") && strings.Contains(ev.Message, "PodDisruptionBudget held/everything") {
				return true
			}
		}
		return false
	}, 2*time.Minute, time.Second, "the held node is not consolidated: its budget (empty selector) allows no disruption")
	s.Kubectl("delete", "nodeclaim", held.Name, "--wait=false") // its drain is stuck for good

	s.Kubectl("-n", "free", "delete", "deployment", "big")
	claimGone(t, s, free.Name, 4*time.Minute)
	for _, pool := range []string{"held", "free"} {
		require.Eventually(t, func() bool {
			pods, err := s.Kube.CoreV1().Pods(pool).List(context.Background(), metav1.ListOptions{LabelSelector: "app=small"})
			return err == nil && len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning
		}, time.Minute, time.Second, "pool %s's small pod Running", pool)
	}
	for _, c := range s.NodeClaims(t) {
		if c.Name == held.Name {
			assert.NotNil(t, c.DeletionTimestamp, "the held node is still draining, behind its budget")
		}
	}
}

// An expired node holding a do-not-disrupt pod goes within expireAfter + terminationGracePeriod:
// expiry is forceful (Karpenter v1); the drain waits for the pod until the grace period ends, then
// deletes it. Before, do-not-disrupt held an expired node back for good.
func TestExpiryIsBoundedByTheGracePeriod(t *testing.T) {
	t.Parallel()
	s := safetyStack(t, `{"template":{"spec":{"expireAfter":"90s","terminationGracePeriod":"30s"}},"disruption":{"consolidateAfter":"Never"}}`, e2e.Options{})
	workload(t, s, "default", "keep", 1, "500m", 0, `{karpenter.sh/do-not-disrupt: "true"}`, "")
	podsRunning(t, s, "app=keep", 1, 3*time.Minute)
	old := onlyClaim(t, s)
	due := old.CreationTimestamp.Add(90*time.Second + 30*time.Second)
	// The bound is the test: a margin for the passes (1 s) and the drain's rounds, none for a wait.
	claimGone(t, s, old.Name, time.Until(due)+30*time.Second)
	var steps []string
	for _, c := range s.ClaimLog().Claims() {
		if c.Name == old.Name {
			if d, ok, _ := disruption.DecisionOf(c); ok {
				for _, st := range d.Steps {
					steps = append(steps, string(st.Name))
				}
				assert.Equal(t, disruption.ReasonExpired, d.Reason)
			}
		}
	}
	sort.Strings(steps)
	assert.Contains(t, steps, string(disruption.StepDeleted), "the decision records its deletion")
}
