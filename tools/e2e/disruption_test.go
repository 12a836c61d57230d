package e2e_test

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

func clientKey(name string) client.ObjectKey { return client.ObjectKey{Name: name} }

// replacesAnnotation is what the scheduler puts on a replacement NodeClaim.
const replacesAnnotation = "fleetwright.io/replaces"

// v1Stack starts a stack with the terminator and the v1 example, its pool patched by patch (a
// JSON merge patch of the NodePool's spec), if given.
func v1Stack(t *testing.T, patch string) *e2e.Stack {
	t.Helper()
	s := e2e.NewStack(t, withTerminator())
	s.Apply("deploy/examples/v1/default.yaml")
	if patch != "" {
		s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p", `{"spec":`+patch+`}`)
	}
	return s
}

// vCPUs is the nodes' total CPU capacity.
func vCPUs(nodes []corev1.Node) int64 {
	var total int64
	for _, n := range nodes {
		total += n.Status.Capacity.Cpu().Value()
	}
	return total
}

// freshPlanVCPUs is how many vCPUs a fresh plan buys for n pods of one CPU on the default
// v1 pool: the core solves it on the catalog, as the scheduler would for a new cluster.
func freshPlanVCPUs(t *testing.T, s *e2e.Stack, n int) int64 {
	t.Helper()
	var np karpv1.NodePool
	require.NoError(t, s.Client.Get(context.Background(), clientKey("default"), &np))
	pool := scheduling.NodePool{Name: np.Name}
	for _, r := range np.Spec.Template.Spec.Requirements {
		pool.Requirements = append(pool.Requirements, scheduling.Requirement{Key: r.Key, Operator: scheduling.Operator(r.Operator), Values: r.Values})
	}
	// Priced as the stack's launcher prices them: the region's on-demand and spot prices.
	types := scheduling.FromCatalog(catalog.Schedulable(), []string{"us-east-1a", "us-east-1b", "us-east-1c"})
	priced := types[:0]
	for _, it := range types {
		if _, ok := catalog.OnDemandPrice(s.Region(), it.Name); !ok {
			continue // the launcher leaves an unpriced type out
		}
		for i, o := range it.Offerings {
			if o.CapacityType == scheduling.CapacityTypeSpot {
				it.Offerings[i].PriceUSDPerHour = s.SpotPrice(it.Name, o.Zone)
			} else {
				it.Offerings[i].PriceUSDPerHour = s.OnDemandPrice(it.Name)
			}
		}
		priced = append(priced, it)
	}
	in := scheduling.Input{NodePools: []scheduling.NodePool{pool}, InstanceTypes: priced}
	for i := 0; i < n; i++ {
		in.Pods = append(in.Pods, scheduling.Pod{UID: string(rune('a' + i)), Namespace: "default", Name: "p",
			Requests: scheduling.ResourceList{scheduling.ResourceCPU: 1000}})
	}
	plan, err := scheduling.Solve(in)
	require.NoError(t, err)
	require.Empty(t, plan.Unschedulable)
	var total int64
	for _, c := range plan.NodeClaims {
		it, ok := catalog.Lookup(c.InstanceTypes[0])
		require.True(t, ok)
		total += int64(it.VCPU)
	}
	return total
}

// The scenario from the issue: the v1 example (WhenEmptyOrUnderutilized, consolidateAfter
// shortened to 10s), inflate 9 → 3. The nodes left half used are consolidated until the cluster
// holds no more vCPUs than a fresh plan for 3 pods would buy, with the 3 pods Running.
func TestConsolidationShrinksAfterScaleDown(t *testing.T) {
	t.Parallel()
	s := v1Stack(t, `{"disruption":{"consolidateAfter":"10s"}}`)
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "9")
	podsRunning(t, s, "app=inflate", 9, 3*time.Minute)
	before := launchedNodes(t, s)
	want := freshPlanVCPUs(t, s, 3)

	// Which pods a scale-down removes is the ReplicaSet controller's choice: left alone it can
	// empty whole nodes (then they go as Empty, not consolidated). A deletion cost on one pod per
	// node makes it keep one on each, so every node is left underutilized.
	keepOnePerNode(t, s, "app=inflate")

	start := time.Now()
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "3")
	require.Eventually(t, func() bool {
		nodes := launchedNodes(t, s)
		return len(nodes) > 0 && vCPUs(nodes) <= want && len(podsByNode(t, s, "app=inflate")) > 0
	}, 4*time.Minute, 500*time.Millisecond, "the cluster shrinks to at most the %d vCPUs a fresh plan for 3 pods buys", want)
	podsRunning(t, s, "app=inflate", 3, 2*time.Minute)
	after := launchedNodes(t, s)
	t.Logf("inflate 9 → 3: %d nodes (%d vCPUs) → %d nodes (%d vCPUs; a fresh plan: %d) in %s",
		len(before), vCPUs(before), len(after), vCPUs(after), want, time.Since(start).Round(100*time.Millisecond))
	assert.Contains(t, s.Service("scheduler").Log(), `"reason":"Underutilized"`, "the scheduler consolidated underutilized nodes")
	require.Eventually(t, func() bool { return len(s.NodeClaims(t)) == len(launchedNodes(t, s)) }, time.Minute, 250*time.Millisecond,
		"every claim left has its node")
	noLeftovers(t, s)
}

// keepOnePerNode gives one pod of the selector on each node a pod-deletion-cost, so that a
// scale-down to the number of nodes leaves one pod on every node.
func keepOnePerNode(t *testing.T, s *e2e.Stack, selector string) {
	t.Helper()
	ctx := context.Background()
	pods, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	kept := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || kept[p.Spec.NodeName] {
			continue
		}
		kept[p.Spec.NodeName] = true
		patch := []byte(`{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"1000"}}}`)
		_, err := s.Kube.CoreV1().Pods("default").Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	}
}

// stamp is when something was first seen.
type stamp struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (st *stamp) see(key string, now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.at[key]; !ok {
		st.at[key] = now
	}
}

func (st *stamp) get(key string) (time.Time, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	t, ok := st.at[key]
	return t, ok
}

// every runs f every period in the background until the returned stop is called (or the test
// ends); stop waits for the last run.
func every(t *testing.T, period time.Duration, f func()) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(period):
			}
			f()
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	t.Cleanup(stop)
	return stop
}

// watchTaints records when each node is first seen tainted karpenter.sh/disrupted.
func watchTaints(t *testing.T, s *e2e.Stack) *stamp {
	st := &stamp{at: map[string]time.Time{}}
	every(t, 100*time.Millisecond, func() {
		var list corev1.NodeList
		if err := s.Client.List(context.Background(), &list); err != nil {
			return
		}
		now := time.Now()
		for i := range list.Items {
			if disrupted(&list.Items[i]) {
				st.see(list.Items[i].Name, now)
			}
		}
	})
	return st
}

// replacementSetup leaves one t4g.xlarge on demand running a single 1-CPU pod, on a pool that
// then allows the cheaper t4g.medium: a node whose pod fits a cheaper type. The pool
// consolidates after 5s; patch is merged into its spec.
func replacementSetup(t *testing.T, patch string) (*e2e.Stack, corev1.Node) {
	t.Helper()
	s := v1Stack(t, `{"disruption":{"consolidateAfter":"5s"},"template":{"spec":{"requirements":[
		{"key":"node.kubernetes.io/instance-type","operator":"In","values":["t4g.xlarge"]},
		{"key":"karpenter.sh/capacity-type","operator":"In","values":["on-demand"]},
		{"key":"topology.kubernetes.io/zone","operator":"In","values":["us-east-1a"]},
		{"key":"kubernetes.io/arch","operator":"In","values":["arm64"]}]}}}`)
	if patch != "" {
		s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p", `{"spec":`+patch+`}`)
	}
	// A 1-CPU pod and a 2-CPU filler, in one batch, buy one t4g.xlarge; then the filler goes.
	deployment(t, s, "web", 1, "1", "", "")
	deployment(t, s, "filler", 1, "2", "", "")
	podsRunning(t, s, "app=web", 1, 3*time.Minute)
	podsRunning(t, s, "app=filler", 1, time.Minute)
	nodes := launchedNodes(t, s)
	require.Len(t, nodes, 1)
	require.Equal(t, "t4g.xlarge", nodes[0].Labels[corev1.LabelInstanceTypeStable])
	s.Kubectl("delete", "deployment", "filler")
	require.Eventually(t, func() bool { return len(podsByNode(t, s, "app=filler")) == 0 }, time.Minute, 200*time.Millisecond, "the filler is gone")
	// Now the pool allows the smaller types too (the node's labels still satisfy it: no drift).
	s.Kubectl("patch", "nodepool", "default", "--type", "json", "-p",
		`[{"op":"replace","path":"/spec/template/spec/requirements/0/values","value":["t4g.medium","t4g.large","t4g.xlarge"]}]`)
	return s, nodes[0]
}

// A node whose pod fits a cheaper type is replaced by one, in Karpenter v1's order: the old node
// is tainted (nothing new lands on it) before its replacement is created, the replacement is
// Initialized before the old node is drained, and the pod ends on the replacement.
func TestConsolidationReplacesWithACheaperNode(t *testing.T) {
	t.Parallel()
	s, old := replacementSetup(t, "")
	taints := watchTaints(t, s)
	oldClaim := claimOfNode(t, s, old.Name)
	require.NotNil(t, oldClaim)
	start := time.Now()

	var rep karpv1.NodeClaim
	require.Eventually(t, func() bool {
		for _, c := range s.NodeClaims(t) {
			if c.Annotations[replacesAnnotation] == oldClaim.Name {
				rep = c
				return true
			}
		}
		return false
	}, 2*time.Minute, 200*time.Millisecond, "a replacement NodeClaim is created")
	decided := time.Since(start)
	gone(t, s, old.Name, instanceOf(&old), oldClaim.Name, 3*time.Minute)
	podsRunning(t, s, "app=web", 1, time.Minute)

	var final karpv1.NodeClaim
	require.NoError(t, s.Client.Get(context.Background(), clientKey(rep.Name), &final))
	init := final.Condition(karpv1.ConditionTypeInitialized)
	require.NotNil(t, init, "the replacement is Initialized")
	tainted, ok := taints.get(old.Name)
	require.True(t, ok, "the old node was tainted before it went")
	// The creation time has whole seconds; the sample is at most 100ms late.
	assert.False(t, tainted.After(final.CreationTimestamp.Add(time.Second)), "old node tainted at %s, after its replacement was created at %s",
		tainted, final.CreationTimestamp.Time)
	assert.True(t, tainted.Before(init.LastTransitionTime.Add(time.Second)), "old node tainted at %s, replacement Initialized at %s", tainted, init.LastTransitionTime.Time)
	nodes := launchedNodes(t, s)
	require.Len(t, nodes, 1)
	assert.Equal(t, final.Status.NodeName, nodes[0].Name)
	newType := nodes[0].Labels[corev1.LabelInstanceTypeStable]
	assert.Less(t, s.OnDemandPrice(newType), s.OnDemandPrice("t4g.xlarge"), "replaced by a cheaper type, %s", newType)
	assert.Equal(t, 1, podsByNode(t, s, "app=web")[nodes[0].Name], "the pod runs on the replacement")
	t.Logf("candidate → replacement created %s; replacement Initialized %s, old node tainted %s; old node gone %s after the scale-down",
		decided.Round(100*time.Millisecond), init.LastTransitionTime.Sub(start).Round(time.Second), tainted.Sub(start).Round(100*time.Millisecond),
		time.Since(start).Round(100*time.Millisecond))
	noLeftovers(t, s)
}

// nodeEvents lists the messages of events with the reason about a NodeClaim or Node.
func disruptionEvents(t *testing.T, s *e2e.Stack, reason string) []string {
	t.Helper()
	evs, err := s.Kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	require.NoError(t, err)
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "NodeClaim" || e.InvolvedObject.Kind == "Node" {
			out = append(out, e.Message)
		}
	}
	sort.Strings(out)
	return out
}

// eventSays waits for a NodeClaim or Node event with the reason whose message contains want.
func eventSays(t *testing.T, s *e2e.Stack, reason, want string, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, m := range disruptionEvents(t, s, reason) {
			if strings.Contains(m, want) {
				return true
			}
		}
		return false
	}, within, 250*time.Millisecond, "a %s event says %q", reason, want)
}

// stays checks that the node is still there, untainted, and no replacement was made.
func stays(t *testing.T, s *e2e.Stack, node string) {
	t.Helper()
	n := getNode(t, s, node)
	require.NotNil(t, n, "node %s stays", node)
	assert.False(t, disrupted(n), "and is not tainted")
	for _, c := range s.NodeClaims(t) {
		assert.Empty(t, c.Annotations[replacesAnnotation], "no replacement was made")
		if c.Status.NodeName == node {
			assert.True(t, c.IsTrue(karpv1.ConditionTypeConsolidatable), "the claim is Consolidatable, only held back")
		}
	}
}

// Each of these holds consolidation back, and an event on the NodeClaim says which.
func TestConsolidationBlocked(t *testing.T) {
	t.Parallel()
	t.Run("do-not-disrupt pod", func(t *testing.T) {
		s, old := replacementSetup(t, "")
		s.Kubectl("annotate", "pods", "-l", "app=web", "karpenter.sh/do-not-disrupt=true")
		eventSays(t, s, "Unconsolidatable", "is annotated karpenter.sh/do-not-disrupt", 2*time.Minute)
		stays(t, s, old.Name)
	})
	t.Run("PDB allows no disruption", func(t *testing.T) {
		s, old := replacementSetup(t, "")
		pdb(t, s, "web", "0")
		eventSays(t, s, "Unconsolidatable", "PodDisruptionBudget default/web allows no disruption", 2*time.Minute)
		stays(t, s, old.Name)
	})
	t.Run("savings below the pool's threshold", func(t *testing.T) {
		// t4g.medium saves 75% of a t4g.xlarge; the pool asks for more.
		s, old := replacementSetup(t, "")
		s.Kubectl("annotate", "nodepool", "default", "fleetwright.io/consolidation-min-savings=80%")
		eventSays(t, s, "Unconsolidatable", "below the 80% threshold", 2*time.Minute)
		stays(t, s, old.Name)
	})
}

// The terminator killed after the replacement was created and before the old node is drained:
// when it comes back, the decision is carried out once — one replacement, the old node gone,
// no node left tainted.
func TestConsolidationSurvivesATerminatorCrash(t *testing.T) {
	t.Parallel()
	s, old := replacementSetup(t, "")
	oldClaim := claimOfNode(t, s, old.Name)
	require.NotNil(t, oldClaim)
	require.Eventually(t, func() bool {
		for _, c := range s.NodeClaims(t) {
			if c.Annotations[replacesAnnotation] == oldClaim.Name {
				return true
			}
		}
		return false
	}, 2*time.Minute, 100*time.Millisecond, "a replacement NodeClaim is created")
	s.Service("terminator").Kill()
	// The replacement initializes meanwhile, and the old node's termination intent waits.
	require.Eventually(t, func() bool {
		for _, c := range s.NodeClaims(t) {
			if c.Annotations[replacesAnnotation] == oldClaim.Name && c.IsTrue(karpv1.ConditionTypeInitialized) {
				return true
			}
		}
		return false
	}, 2*time.Minute, 100*time.Millisecond, "the replacement initializes")
	n := getNode(t, s, old.Name)
	require.NotNil(t, n)
	// The decision tainted it before the replacement was launched (the scheduler's leader does,
	// Karpenter's order), with or without a terminator.
	assert.True(t, disrupted(n), "the old node is tainted while its replacement comes up")
	s.StartService("terminator")
	gone(t, s, old.Name, instanceOf(&old), oldClaim.Name, 3*time.Minute)
	podsRunning(t, s, "app=web", 1, time.Minute)
	replacements := 0
	for _, c := range s.NodeClaims(t) {
		if c.Annotations[replacesAnnotation] != "" {
			replacements++
		}
	}
	assert.Equal(t, 1, replacements, "one replacement")
	assert.Len(t, launchedNodes(t, s), 1)
	noLeftovers(t, s)
	oneInstancePerClaim(t, s)
}

// disruptingNow counts the launched nodes being taken away: tainted karpenter.sh/disrupted, or
// their NodeClaim being deleted.
func disruptingNow(t *testing.T, s *e2e.Stack) int {
	t.Helper()
	deleting := map[string]bool{}
	for _, c := range s.NodeClaims(t) {
		if c.DeletionTimestamp != nil && c.Status.NodeName != "" {
			deleting[c.Status.NodeName] = true
		}
	}
	n := 0
	for _, node := range launchedNodes(t, s) {
		if disrupted(&node) || deleting[node.Name] {
			n++
		}
	}
	return n
}

// Changing the NodePool's template labels drifts every node: each is replaced, at most the
// budget (one) at a time, with the workload's pods Running throughout but for one node's worth.
func TestDriftReplacesEveryNode(t *testing.T) {
	t.Parallel()
	s := v1Stack(t, `{"disruption":{"budgets":[{"nodes":"1"}]}}`)
	// Three pods that may not share a node: three nodes, one pod each.
	deployment(t, s, "web", 3, "1", "", `      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {matchLabels: {app: web}}
              topologyKey: kubernetes.io/hostname`)
	podsRunning(t, s, "app=web", 3, 3*time.Minute)
	before := map[string]bool{}
	for _, n := range launchedNodes(t, s) {
		before[n.Name] = true
	}
	require.Len(t, before, 3)

	unavailable := sampleUnavailable(t, s, "app=web", 3)
	var mu sync.Mutex
	most := 0
	stop := every(t, 200*time.Millisecond, func() {
		n := disruptingNow(t, s)
		mu.Lock()
		most = max(most, n)
		mu.Unlock()
	})
	start := time.Now()
	s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p", `{"spec":{"template":{"metadata":{"labels":{"team":"blue"}}}}}`)
	eventSays(t, s, "DisruptionLaunching", "Drifted", 2*time.Minute)
	require.Eventually(t, func() bool {
		nodes := launchedNodes(t, s)
		for _, n := range nodes {
			if before[n.Name] || n.Labels["team"] != "blue" {
				return false
			}
		}
		return len(nodes) == 3 && len(podsByNode(t, s, "app=web")) == 3
	}, 6*time.Minute, 500*time.Millisecond, "every node is replaced by one with the new label")
	podsRunning(t, s, "app=web", 3, time.Minute)
	stop()
	unavailable.finish()
	t.Logf("3 drifted nodes replaced in %s; at most %d disrupting at once, at most %d of 3 pods unavailable (%d samples)",
		time.Since(start).Round(100*time.Millisecond), most, unavailable.max, unavailable.samples)
	assert.LessOrEqual(t, most, 1, "never more than the budget disrupting at once")
	assert.LessOrEqual(t, unavailable.max, 1, "pods Running throughout but for one node's worth")
	noLeftovers(t, s)
}

// v1alpha5's consolidation.enabled consolidates too: two spot nodes each left with one 1-CPU
// pod (their 6.5-CPU fillers gone) become one, the other deleted as underutilized.
func TestConsolidationEnabledV1Alpha5(t *testing.T) {
	t.Parallel()
	s := legacyStack(t, `{"ttlSecondsAfterEmpty":null,"consolidation":{"enabled":true},"requirements":[
		{"key":"node.kubernetes.io/instance-type","operator":"In","values":["c6i.2xlarge"]},
		{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]}]}`)
	// Two fillers too big to share a c6i.2xlarge (7.9 CPUs allocatable): a node each.
	deployment(t, s, "filler-a", 1, "6500m", "", "")
	podsRunning(t, s, "app=filler-a", 1, 3*time.Minute)
	deployment(t, s, "filler-b", 1, "6500m", "", "")
	podsRunning(t, s, "app=filler-b", 1, 3*time.Minute)
	require.Len(t, launchedNodes(t, s), 2)
	// Each node has room for one 1-CPU pod left: kube-scheduler puts one web pod on each.
	deployment(t, s, "web", 2, "1", "", "")
	podsRunning(t, s, "app=web", 2, time.Minute)
	require.Len(t, podsByNode(t, s, "app=web"), 2, "one web pod on each node")
	start := time.Now()
	s.Kubectl("delete", "deployment", "filler-a", "filler-b")
	require.Eventually(t, func() bool { return len(launchedNodes(t, s)) == 1 }, 3*time.Minute, 250*time.Millisecond,
		"the two half-empty nodes become one")
	podsRunning(t, s, "app=web", 2, time.Minute)
	t.Logf("fillers deleted → one node left in %s", time.Since(start).Round(100*time.Millisecond))
	eventSays(t, s, "DisruptionTerminating", "Underutilized: delete", time.Minute)
	noLeftovers(t, s)
}
