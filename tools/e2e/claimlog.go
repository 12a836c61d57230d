package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// ClaimLog remembers every NodeClaim a stack ever had, as last seen, so a test can count the
// claims made for a workload after some of them were consolidated away (and the stack can check
// the launch-loop invariant when its test ends).
type ClaimLog struct {
	mu      sync.Mutex
	claims  map[string]*karpv1.NodeClaim // by UID
	hadNode map[string]bool              // by UID: its node registered at some point
}

// watchClaims records the cluster's NodeClaims until ctx ends, watching again after any break.
func watchClaims(ctx context.Context, dyn dynamic.Interface) *ClaimLog {
	l := &ClaimLog{claims: map[string]*karpv1.NodeClaim{}, hadNode: map[string]bool{}}
	go func() {
		for ctx.Err() == nil {
			w, err := dyn.Resource(clusterstate.NodeClaims).Watch(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error || ev.Type == watch.Bookmark {
					continue
				}
				var nc karpv1.NodeClaim
				if u, ok := ev.Object.(runtime.Unstructured); !ok || runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &nc) != nil {
					continue
				}
				l.record(&nc)
			}
			w.Stop()
		}
	}()
	return l
}

func (l *ClaimLog) record(nc *karpv1.NodeClaim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claims[string(nc.UID)] = nc
	l.hadNode[string(nc.UID)] = l.hadNode[string(nc.UID)] || nc.Status.NodeName != ""
}

// Claims are every NodeClaim seen so far, oldest first.
func (l *ClaimLog) Claims() []*karpv1.NodeClaim {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*karpv1.NodeClaim, 0, len(l.claims))
	for _, nc := range l.claims {
		out = append(out, nc)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreationTimestamp.Equal(&out[j].CreationTimestamp) {
			return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// LaunchedFor returns the claims ever made for the pod's workload (podproj.WorkloadOf), oldest
// first.
func (l *ClaimLog) LaunchedFor(pod *corev1.Pod) []*karpv1.NodeClaim {
	w := podproj.WorkloadOf(pod)
	var out []*karpv1.NodeClaim
	for _, nc := range l.Claims() {
		var prior map[string]int
		if json.Unmarshal([]byte(nc.Annotations[podproj.LaunchedForAnnotation]), &prior) == nil {
			if _, ok := prior[w]; ok {
				out = append(out, nc)
			}
		}
	}
	return out
}

// LaunchLoop is the invariant the launch-loop breaker keeps: no pod stays pending while two or
// more nodes launched for its workload came up, unless the breaker recorded that those nodes did
// not hold it (a misfit, which stops the launches).
const LaunchLoop = "launch loop"

// launchLoopViolations checks LaunchLoop against the pods pending now.
func (l *ClaimLog) launchLoopViolations(pending []*corev1.Pod) []Violation {
	var out []Violation
	seen := map[string]bool{}
	for _, p := range pending {
		w := podproj.WorkloadOf(p)
		if seen[w] {
			continue
		}
		seen[w] = true
		var up []string
		reported := false
		for _, nc := range l.LaunchedFor(p) {
			l.mu.Lock()
			had := l.hadNode[string(nc.UID)]
			l.mu.Unlock()
			if had {
				up = append(up, nc.Name)
			}
			if m, ok := podproj.MisfitOf(nc); ok && slices.Contains(m.Workloads, w) {
				reported = true
			}
		}
		if len(up) >= 2 && !reported {
			out = append(out, Violation{Kind: LaunchLoop, Detail: fmt.Sprintf("pod %s/%s is pending though %d nodes came up for its workload (%v), and no misfit was recorded",
				p.Namespace, p.Name, len(up), up)})
		}
	}
	return out
}

// assertNoLaunchLoop fails the test if LaunchLoop is broken when it ends.
func (s *Stack) assertNoLaunchLoop(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := s.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("launch-loop check: listing pods: %v", err)
		return
	}
	var pending []*corev1.Pod
	for i := range pods.Items {
		if ok, _ := podproj.Pending(&pods.Items[i]); ok {
			pending = append(pending, &pods.Items[i])
		}
	}
	for _, v := range s.claimLog.launchLoopViolations(pending) {
		t.Errorf("invariant broken: %s", v)
	}
}
