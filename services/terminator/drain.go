package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetwright/fleetwright/pkg/clock"
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// drainStats counts one delivery's eviction calls.
type drainStats struct {
	Evicted int32 // accepted by the Eviction API
	Retries int32 // refused with 429 (a PodDisruptionBudget) and retried
	Waiting int   // pods still to go when a delivery's budget ran out
}

// Eviction retry pacing: a refused eviction is tried again after minBackoff, doubling up to
// maxBackoff while the budget keeps refusing.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// drain evicts the node's pods through the Eviction API, so PodDisruptionBudgets hold, until
// none but DaemonSet and mirror pods are left (true), or until budget passes (false). After
// deadline (if set) remaining pods are deleted without eviction.
func (e *executor) drain(ctx context.Context, node string, deadline, budget time.Time, st *drainStats, log zerolog.Logger) (bool, error) {
	backoff := minBackoff
	for {
		pods, err := e.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, fmt.Errorf("listing pods on %s: %w", node, err)
		}
		left := evictable(pods.Items)
		if len(left) == 0 {
			return true, nil
		}
		force := !deadline.IsZero() && !e.now().Before(deadline)
		refused := false
		for i := range left {
			p := &left[i]
			switch {
			case force:
				e.forceDelete(ctx, p, log)
			case p.DeletionTimestamp != nil:
				// evicted already; waiting for it to go
			default:
				refused = e.evict(ctx, p, st, log) || refused
			}
		}
		if e.now().After(budget) {
			st.Waiting = len(left)
			log.Info().Str("node", node).Int("pods_left", len(left)).Msg("node still draining")
			return false, nil
		}
		wait := minBackoff
		if refused {
			wait = backoff
			backoff = min(2*backoff, maxBackoff)
		} else {
			backoff = minBackoff
		}
		clock.Sleep(ctx, wait)
		if ctx.Err() != nil {
			return false, nil
		}
	}
}

// evictable are the pods a drain must move: not DaemonSet or mirror pods, not finished.
func evictable(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if podproj.StaysWithNode(&p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, p)
	}
	return out
}

// evict asks the Eviction API to evict one pod; it reports whether a budget refused.
func (e *executor) evict(ctx context.Context, p *corev1.Pod, st *drainStats, log zerolog.Logger) bool {
	uid := p.UID
	err := e.cs.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	})
	switch {
	case err == nil:
		st.Evicted++
		e.metrics.evictions.WithLabelValues("evicted").Inc()
		log.Info().Str("pod", p.Namespace+"/"+p.Name).Msg("evicted pod")
	case apierrors.IsTooManyRequests(err):
		st.Retries++
		e.metrics.evictions.WithLabelValues("retried").Inc()
		log.Debug().Str("pod", p.Namespace+"/"+p.Name).Msg("eviction refused by a disruption budget; retrying")
		return true
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// gone, or replaced by a pod of the same name: the next listing tells
	default:
		e.metrics.evictions.WithLabelValues("error").Inc()
		log.Warn().Err(err).Str("pod", p.Namespace+"/"+p.Name).Msg("evicting pod")
	}
	return false
}

// forceDelete deletes a pod at once: the node's termination grace period has run out.
func (e *executor) forceDelete(ctx context.Context, p *corev1.Pod, log zerolog.Logger) {
	if p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0 {
		return
	}
	zero := int64(0)
	err := e.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		log.Warn().Err(err).Str("pod", p.Namespace+"/"+p.Name).Msg("deleting pod after the termination grace period")
		return
	}
	e.metrics.evictions.WithLabelValues("forced").Inc()
	log.Info().Str("pod", p.Namespace+"/"+p.Name).Msg("deleted pod: termination grace period is over")
}
