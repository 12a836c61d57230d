package fault_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetwright/fleetwright/tools/e2e"
)

// The subtests wait more than they compute (a stack is ~0.3 of a core; most of a subtest is
// the garbage collector's window): unless -test.parallel is given, four run at once.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}

// allServices is every service: the terminator is the garbage collector of orphaned
// instances, so a fault test without it could not tell an orphan from a late one.
var allServices = []string{"pod-watcher", "scheduler", "launcher", "terminator"}

// gcWindow is the e2e stack's --gc-grace (30 s) plus its --gc-interval (5 s), as
// AssertInvariants counts it, and a few seconds for the GC's pass.
const gcWindow = 40 * time.Second

// workload is the namespace whose pods must all run at the end.
var workload = []string{"default"}

// watch checks the invariants that must hold at every moment (no duplicate instance, no
// PodDisruptionBudget violated, no orphan older than the GC window) every 250 ms from now until
// the test ends, and fails the test with each one seen.
func watch(t *testing.T, s *e2e.Stack) {
	t.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	seen := map[string]bool{}
	var samples int
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			v, err := e2e.Violations(ctx, s.Client, s.Emu, e2e.InvariantOptions{GCWindow: gcWindow})
			cancel()
			if err != nil {
				continue // the API server may be restarting
			}
			mu.Lock()
			samples++
			for _, x := range v {
				seen[x.String()] = true
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		for v := range seen {
			t.Errorf("invariant broken while the system worked: %s", v)
		}
		t.Logf("invariants sampled %d times while the system worked", samples)
	})
}

// settle asserts the final invariants: every workload pod Running, no node left tainted, no
// duplicate; then, once the GC window has passed since the fault, again, so an orphan the
// fault left is one the garbage collector had time to reap.
func settle(t *testing.T, s *e2e.Stack, fault time.Time) {
	t.Helper()
	settleRBAC(t, s, fault, true)
}

// settleRBAC is settle, checking the services' logs for RBAC refusals only if rbac.
func settleRBAC(t *testing.T, s *e2e.Stack, fault time.Time, rbac bool) {
	t.Helper()
	s.AssertInvariants(t, workload, 3*time.Minute)
	took := time.Since(fault)
	if wait := time.Until(fault.Add(gcWindow)); wait > 0 {
		time.Sleep(wait)
	}
	s.AssertInvariants(t, workload, 30*time.Second)
	// Each service runs as its ServiceAccount with deploy/'s RBAC: a recovery that needs a
	// permission the manifests lack would fail on a user's cluster however it went here.
	for _, n := range allServices {
		if !rbac {
			break
		}
		for _, line := range strings.Split(s.Service(n).Log(), "\n") {
			if strings.Contains(line, `is forbidden: User \"system:serviceaccount:fleetwright:`) {
				t.Errorf("%s was refused by RBAC: %s", n, line)
				break
			}
		}
	}
	if os.Getenv("FAULT_DUMP") != "" {
		for _, n := range allServices {
			s.Service(n).DumpLog()
		}
	}
	if !t.Failed() {
		t.Logf("settled %s after the fault; invariants held (checked again %s after it)",
			took.Round(100*time.Millisecond), time.Since(fault).Round(time.Second))
	}
}

// applyYAML applies a manifest given inline.
func applyYAML(t *testing.T, s *e2e.Stack, manifest string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	require.NoError(t, os.WriteFile(path, []byte(manifest), 0o600))
	s.Apply(path)
}

// web applies a Deployment of n pause pods of 500m and a PodDisruptionBudget on them with
// maxUnavailable 1, and waits until they run and the budget is observed.
func web(t *testing.T, s *e2e.Stack, n int) {
	t.Helper()
	applyWeb(t, s, n)
	webRunning(t, s, n, 3*time.Minute)
}

// applyWeb applies web's Deployment and PodDisruptionBudget without waiting.
func applyWeb(t *testing.T, s *e2e.Stack, n int) {
	t.Helper()
	applyYAML(t, s, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: %d
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
        - name: pause
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {requests: {cpu: 500m}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
`, n))
}

// webRunning waits until web's n pods run and the disruption controller observes its budget.
func webRunning(t *testing.T, s *e2e.Stack, n int, within time.Duration) {
	t.Helper()
	podsRunning(t, s, "app=web", n, within)
	require.Eventually(t, func() bool {
		b, err := s.Kube.PolicyV1().PodDisruptionBudgets("default").Get(context.Background(), "web", metav1.GetOptions{})
		return err == nil && b.Status.ObservedGeneration == b.Generation && b.Status.ExpectedPods == int32(n) && b.Status.CurrentHealthy == int32(n)
	}, time.Minute, 200*time.Millisecond, "the disruption controller observes the budget")
}

// podsRunning waits until n pods of the selector run.
func podsRunning(t *testing.T, s *e2e.Stack, selector string, n int, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		pods, err := s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running == n
	}, within, 200*time.Millisecond, "%d pods %s running", n, selector)
}

// busiest is the node running most pods of the selector, with its NodeClaim and instance.
func busiest(t *testing.T, s *e2e.Stack, selector string) (node, claim, instance string) {
	t.Helper()
	pods, err := s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	count := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			count[p.Spec.NodeName]++
			if count[p.Spec.NodeName] > count[node] {
				node = p.Spec.NodeName
			}
		}
	}
	require.NotEmpty(t, node, "a node runs pods of %s", selector)
	for _, c := range s.NodeClaims(t) {
		if c.Status.NodeName == node {
			claim, instance = c.Name, c.Status.ProviderID[strings.LastIndex(c.Status.ProviderID, "/")+1:]
		}
	}
	require.NotEmpty(t, claim, "node %s has a NodeClaim", node)
	return node, claim, instance
}

// finished waits until a NodeClaim is gone and its instance shutting down or terminated.
func finished(t *testing.T, s *e2e.Stack, claim, instance string, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, c := range s.NodeClaims(t) {
			if c.Name == claim {
				return false
			}
		}
		insts, err := s.Emu.Instances(context.Background())
		require.NoError(t, err)
		for _, i := range insts {
			if i.ID == instance {
				return i.State == "shutting-down" || i.State == "terminated"
			}
		}
		return true
	}, within, 250*time.Millisecond, "nodeclaim %s gone and its instance %s terminated", claim, instance)
}
