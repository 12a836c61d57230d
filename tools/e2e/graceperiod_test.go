package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetwright/fleetwright/tools/e2e"
)

// deletionGraces watches the pods of a selector and records, for each, the grace period of
// the deletion it was first seen terminating with; stop ends the watch.
func deletionGraces(t *testing.T, s *e2e.Stack, selector string) (graces func() map[string]int64, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.Kube.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[string]int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil {
				continue
			}
			mu.Lock()
			if _, ok := seen[p.Name]; !ok {
				seen[p.Name] = *p.DeletionGracePeriodSeconds
			}
			mu.Unlock()
		}
	}()
	stop = func() {
		cancel()
		w.Stop()
		<-done
	}
	t.Cleanup(stop)
	return func() map[string]int64 {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]int64, len(seen))
		for k, v := range seen {
			out[k] = v
		}
		return out
	}, stop
}

// The drift with slow boots: instances boot in 30 s, the pool's terminationGracePeriod
// is 20 s. A drift is carried out once its replacement is Initialized, more than 30 s after the
// decision; the old node's drain still has its whole grace period, counted from the deletion
// of its NodeClaim: the replicas of web leave through the Eviction API, as their
// PodDisruptionBudget allows, and none is deleted with grace 0.
func TestDriftWithSlowBootsKeepsTheGracePeriod(t *testing.T) {
	s := e2e.NewStackWith(t, e2e.Options{Services: withTerminator(), ServiceArgs: map[string][]string{"awsemu": {"--boot-delay", "30s"}}})
	s.Apply("deploy/examples/v1/default.yaml")
	s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p", `{"spec":{"template":{"spec":{"terminationGracePeriod":"20s"}}}}`)
	applyYAML(t, s, `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
        - name: pause
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {requests: {cpu: 500m}}
`)
	podsRunning(t, s, "app=web", 2, 3*time.Minute)
	pdb(t, s, "web", "1")
	old := map[string]bool{}
	for _, n := range launchedNodes(t, s) {
		old[n.Name] = true
	}

	graces, stopWatch := deletionGraces(t, s, "app=web")
	unavailable := sampleUnavailable(t, s, "app=web", 2)
	decided := time.Now()
	s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p", `{"spec":{"template":{"metadata":{"labels":{"team":"blue"}}}}}`)
	require.Eventually(t, func() bool {
		for _, n := range launchedNodes(t, s) {
			if old[n.Name] {
				return false
			}
		}
		byNode := podsByNode(t, s, "app=web")
		for node := range byNode {
			if old[node] {
				return false
			}
		}
		return len(byNode) > 0
	}, 4*time.Minute, 500*time.Millisecond, "every drifted node is replaced and the pods run on the new ones")
	podsRunning(t, s, "app=web", 2, time.Minute)
	unavailable.finish()
	stopWatch()

	deleted := graces()
	t.Logf("drift with 30 s boots replaced %d node(s) in %s; web pods deleted with grace periods %v; at most %d of 2 unavailable (%d samples)",
		len(old), time.Since(decided).Round(100*time.Millisecond), deleted, unavailable.max, unavailable.samples)
	require.NotEmpty(t, deleted, "the drifted node's pods were moved")
	for pod, g := range deleted {
		assert.GreaterOrEqual(t, g, int64(1), fmt.Sprintf("pod %s was deleted with grace 0", pod))
	}
	assert.LessOrEqual(t, unavailable.max, 1, "the PodDisruptionBudget held")
	noLeftovers(t, s)
}
