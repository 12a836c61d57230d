package main

import (
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// kube-scheduler is the judge of whether a nominated pod fits its claim's node: once the node
// can take pods, kube-scheduler tries the pod there (a node's taint lifted or the node added
// moves the pods it rejected back into its queue), and if it cannot place it, it rewrites the
// pod's PodScheduled=False condition (its message counts the nodes by why they refused, so it
// changes when a node's reason does). kubeAttempts keeps, from the informers, what that judgement
// needs: when each pod's Unschedulable condition was last rewritten, and when each node last
// changed in what kube-scheduler filters on (taints, labels, cordon). A rewrite seen after the
// node's last such change comes from an attempt that saw the node as it is (kube-scheduler
// writes a failure before its next attempt; see refusedOn).

// kubeAttempts remembers the times, as this replica's informers saw them.
type kubeAttempts struct {
	now     func() time.Time
	changed func() // nudges the nomination check

	mu      sync.Mutex
	refused map[types.UID]time.Time // pod → when its Unschedulable condition was last rewritten
	settled map[string]time.Time    // node → when its taints, labels or cordon last changed
}

func newKubeAttempts(now func() time.Time, changed func()) *kubeAttempts {
	return &kubeAttempts{now: now, changed: changed, refused: map[types.UID]time.Time{}, settled: map[string]time.Time{}}
}

// refusedSince reports whether kube-scheduler rewrote the pod's Unschedulable condition after
// the node last changed and after t.
func (a *kubeAttempts) refusedSince(pod types.UID, node string, t time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.refused[pod]
	settled, known := a.settled[node]
	return ok && known && at.After(settled) && at.After(t)
}

// podHandler records the rewrites of pods' Unschedulable condition. A pod listed when the
// informer starts counts from its next rewrite: when the one it shows was made is unknown.
func (a *kubeAttempts) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, _ := old.(*corev1.Pod)
			p, _ := cur.(*corev1.Pod)
			if o == nil || p == nil {
				return
			}
			if p.Spec.NodeName != "" {
				a.mu.Lock()
				delete(a.refused, p.UID) // placed: its refusals no longer matter
				a.mu.Unlock()
				return
			}
			c := unschedulable(p)
			if c == nil {
				return
			}
			if was := unschedulable(o); was != nil && was.Message == c.Message && was.LastTransitionTime.Equal(&c.LastTransitionTime) {
				return // the same verdict: not a new attempt
			}
			a.mu.Lock()
			a.refused[p.UID] = a.now()
			a.mu.Unlock()
			a.changed()
		},
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				a.mu.Lock()
				delete(a.refused, p.UID)
				a.mu.Unlock()
			}
		},
	}
}

// nodeHandler records when each node last changed in what kube-scheduler filters on. A node
// listed when the informer starts counts from then.
func (a *kubeAttempts) nodeHandler() cache.ResourceEventHandler {
	mark := func(n *corev1.Node) {
		a.mu.Lock()
		a.settled[n.Name] = a.now()
		a.mu.Unlock()
		a.changed()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if n, ok := o.(*corev1.Node); ok {
				mark(n)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, _ := old.(*corev1.Node)
			n, _ := cur.(*corev1.Node)
			if o == nil || n == nil {
				return
			}
			if o.Spec.Unschedulable != n.Spec.Unschedulable || !slices.EqualFunc(o.Spec.Taints, n.Spec.Taints, sameTaint) || !maps.Equal(o.Labels, n.Labels) {
				mark(n)
			}
		},
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if n, ok := o.(*corev1.Node); ok {
				a.mu.Lock()
				delete(a.settled, n.Name)
				a.mu.Unlock()
			}
		},
	}
}

func sameTaint(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

// unschedulable is the pod's PodScheduled=False condition of reason Unschedulable, if it has one.
func unschedulable(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c
		}
	}
	return nil
}

// lifecycleTaints are put on a node by its lifecycle, not by its pool: while one is on, no pod
// goes there whatever it tolerates, and kube-scheduler's refusals say nothing of what the node
// will hold.
var lifecycleTaints = []string{
	karpv1.UnregisteredTaintKey,
	"node.cloudprovider.kubernetes.io/uninitialized",
	corev1.TaintNodeNotReady,
	corev1.TaintNodeUnreachable,
	corev1.TaintNodeUnschedulable,
	corev1.TaintNodeNetworkUnavailable,
}

// takesPods reports whether the claim's node is up for its pods as kube-scheduler judges them:
// Ready, not cordoned, and rid of the claim's startup taints and of every lifecycle taint.
func takesPods(nc *karpv1.NodeClaim, node *corev1.Node) bool {
	if node.Spec.Unschedulable {
		return false
	}
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return false
	}
	for _, t := range node.Spec.Taints {
		if slices.Contains(lifecycleTaints, t.Key) || slices.ContainsFunc(nc.Spec.StartupTaints, func(s corev1.Taint) bool { return s.Key == t.Key }) {
			return false
		}
	}
	return true
}
