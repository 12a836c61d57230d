package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// consolidateAfter counts from a node's last pod event, which Karpenter v1 keeps in its
// NodeClaim's status.lastPodEventTime: a pod bound to the node, finished, terminating or deleted
// (DaemonSet pods aside). The scheduler records it there from its pod informer, so it survives a
// leader change and every reader agrees; a claim's time is written at most every
// lastPodEventDedupe, the latest event of the window written once it passes.

// lastPodEventDedupe is the least time between two writes of one claim's lastPodEventTime
// (Karpenter's dedupe timeout).
const lastPodEventDedupe = 10 * time.Second

// lastPodEvents collects the latest pod event of each node until it is written.
type lastPodEvents struct {
	mu      sync.Mutex
	pending map[string]time.Time // node → its latest pod event not written yet
	now     func() time.Time
}

func newLastPodEvents(now func() time.Time) *lastPodEvents {
	return &lastPodEvents{pending: map[string]time.Time{}, now: now}
}

func (e *lastPodEvents) touch(node string) {
	if node == "" {
		return
	}
	e.mu.Lock()
	e.pending[node] = e.now()
	e.mu.Unlock()
}

// take returns the pending events and forgets them.
func (e *lastPodEvents) take() map[string]time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.pending
	e.pending = map[string]time.Time{}
	return out
}

// putBack keeps an event pending, unless a later one came meanwhile.
func (e *lastPodEvents) putBack(node string, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur, ok := e.pending[node]; !ok || cur.Before(at) {
		e.pending[node] = at
	}
}

// handler feeds the pod informer's events in: a pod bound, finished, terminating or deleted.
func (e *lastPodEvents) handler() cache.ResourceEventHandler {
	pod := func(o any) *corev1.Pod {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		p, _ := o.(*corev1.Pod)
		if p == nil || p.Spec.NodeName == "" || podproj.OwnedBy(p, "DaemonSet") {
			return nil
		}
		return p
	}
	terminal := func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if p := pod(o); p != nil {
				e.touch(p.Spec.NodeName)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, c := pod(old), pod(cur)
			switch {
			case c == nil:
			case o == nil, // just bound
				!terminal(o) && terminal(c),
				o.DeletionTimestamp == nil && c.DeletionTimestamp != nil:
				e.touch(c.Spec.NodeName)
			}
		},
		DeleteFunc: func(o any) {
			if p := pod(o); p != nil {
				e.touch(p.Spec.NodeName)
			}
		},
	}
}

// flushPodEvents writes the pending pod events to their nodes' claims (status.lastPodEventTime).
func (s *scheduler) flushPodEvents(ctx context.Context) error {
	pending := s.podEvents.take()
	if len(pending) == 0 {
		return nil
	}
	byNode := map[string]string{}
	last := map[string]time.Time{}
	for _, nc := range s.cluster.Claims() {
		if nc.Status.NodeName != "" {
			byNode[nc.Status.NodeName] = nc.Name
			last[nc.Name] = nc.Status.LastPodEventTime.Time
		}
	}
	now := s.now()
	var errs []error
	for node, at := range pending {
		claim, ok := byNode[node]
		if !ok {
			continue // not a node of ours, or not linked yet
		}
		if !at.After(last[claim]) {
			continue
		}
		if now.Sub(last[claim]) < lastPodEventDedupe {
			s.podEvents.putBack(node, at)
			continue
		}
		if err := s.writeLastPodEvent(ctx, claim, at); err != nil {
			s.podEvents.putBack(node, at)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *scheduler) writeLastPodEvent(ctx context.Context, claim string, at time.Time) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"lastPodEventTime": metav1.NewTime(at.UTC().Truncate(time.Second))}})
	if err != nil {
		return err
	}
	wctx, done, err := s.fence(ctx, "nodeclaim_status")
	if err != nil {
		return err
	}
	defer done()
	_, err = s.claims.Patch(wctx, claim, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("recording the last pod event of nodeclaim %s: %w", claim, err)
	}
	return nil
}
