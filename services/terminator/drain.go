package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetwright/fleetwright/pkg/clock"
	"github.com/fleetwright/fleetwright/pkg/faultpoint"
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// drainStats counts one delivery's eviction calls.
type drainStats struct {
	Evicted int32 // accepted by the Eviction API
	Retries int32 // refused (429 from a PodDisruptionBudget, or any other error) and retried
	Waiting int   // pods still to go when a delivery's budget ran out
}

// drainRound is what one round of a drain found.
type drainRound struct {
	Round    int      // 1 for the first round of a delivery
	Pods     []string // the pods still to go (namespace/name), while there are any
	PodsGone bool     // no pod holds the node any more
	Forced   bool     // the termination deadline passed: volumes are no longer waited for
	Volumes  []string // once the pods are gone, the VolumeAttachments still naming the node
}

// Eviction retry pacing: a refused eviction (429, or any other error: a 500 for a pod under
// two budgets, a webhook's denial) is tried again after minBackoff, doubling up to maxBackoff
// while it keeps being refused.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// drain evicts the node's pods through the Eviction API, so PodDisruptionBudgets hold, until
// none but DaemonSet and mirror pods are left and no VolumeAttachment names the node any more
// (true), or until budget passes (false). After deadline (if set) remaining pods are deleted
// without eviction and attachments are no longer waited for. A pod past its deletionTimestamp
// (its grace period is over: the kubelet that should have removed it is gone) no longer
// holds the drain, as with Karpenter. observe, if set, is told what every round found.
func (e *executor) drain(ctx context.Context, node string, deadline, budget time.Time, st *drainStats, log zerolog.Logger, observe func(drainRound)) (bool, error) {
	log = log.With().Ctx(ctx).Logger() // its lines carry the drain's span
	backoff := minBackoff
	if observe == nil {
		observe = func(drainRound) {}
	}
	for round := 1; ; round++ {
		pods, err := e.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, fmt.Errorf("listing pods on %s: %w", node, err)
		}
		now := e.now()
		force := !deadline.IsZero() && !now.Before(deadline)
		left := evictable(pods.Items, now)
		if len(left) == 0 {
			if force {
				observe(drainRound{Round: round, PodsGone: true, Forced: true})
				return true, nil
			}
			vas, err := e.attachments(ctx, node)
			if err != nil {
				return false, err
			}
			observe(drainRound{Round: round, PodsGone: true, Volumes: vas})
			if len(vas) == 0 {
				return true, nil
			}
			if now.After(budget) {
				log.Info().Str("node", node).Strs("volume_attachments", vas).Msg("node drained; waiting for its volumes to detach")
				return false, nil
			}
			e.pause(ctx, minBackoff)
			if ctx.Err() != nil {
				return false, nil
			}
			continue
		}
		names := make([]string, len(left))
		for i := range left {
			names[i] = left[i].Namespace + "/" + left[i].Name
		}
		observe(drainRound{Round: round, Pods: names})
		refused, budgets := false, map[string][]policyv1.PodDisruptionBudget{} // budgets: listed once a round, by namespace
		for i := range left {
			p := &left[i]
			switch {
			case force:
				e.forceDelete(ctx, p, log)
			case p.DeletionTimestamp != nil:
				// evicted already; waiting for it to go
			default:
				refused = e.evict(ctx, node, p, budgets, st, log) || refused
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
		e.pause(ctx, wait)
		if ctx.Err() != nil {
			return false, nil
		}
	}
}

// pause waits between drain rounds.
func (e *executor) pause(ctx context.Context, d time.Duration) {
	if e.sleep != nil {
		e.sleep(ctx, d)
		return
	}
	clock.Sleep(ctx, d)
}

// attachments names the VolumeAttachments that still bind a volume to the node: terminating
// the instance before they are gone would leave EBS volumes attached to a dead instance until
// AWS notices (Karpenter waits for them too).
func (e *executor) attachments(ctx context.Context, node string) ([]string, error) {
	vas, err := e.cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing volume attachments of %s: %w", node, err)
	}
	var out []string
	for _, va := range vas.Items {
		if va.Spec.NodeName == node {
			out = append(out, va.Name)
		}
	}
	return out, nil
}

// evictable are the pods a drain must move: not DaemonSet or mirror pods, not finished, and
// not terminating past their deletionTimestamp. The API server sets deletionTimestamp to the
// deletion request plus the grace period, so a pod still there after it is one no kubelet is
// removing (the node is gone, or a finalizer holds the object): waiting for it would keep
// the drain going forever.
func evictable(pods []corev1.Pod, now time.Time) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if podproj.StaysWithNode(&p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.DeletionTimestamp != nil && now.After(p.DeletionTimestamp.Time) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// evict asks the Eviction API to evict one pod; it reports whether the eviction was refused
// and is to be retried with backoff: a 429 (a PodDisruptionBudget said no) or any other error
// (a 500 for a pod under two budgets, a webhook's denial, an API server in trouble).
func (e *executor) evict(ctx context.Context, node string, p *corev1.Pod, budgets map[string][]policyv1.PodDisruptionBudget, st *drainStats, log zerolog.Logger) bool {
	uid := p.UID
	err := e.cs.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	})
	switch {
	case err == nil:
		st.Evicted++
		e.metrics.evictions.WithLabelValues("evicted").Inc()
		tellObject(e.events, p, corev1.EventTypeNormal, reasonEvicted, "Evicted pod to drain node "+node)
		log.Info().Str("pod", p.Namespace+"/"+p.Name).Msg("evicted pod")
		faultpoint.Reach(faultpoint.TerminatorMidDrain)
		return false
	case apierrors.IsTooManyRequests(err):
		if e.completeGranted(ctx, node, p, budgets, st, log) {
			return false
		}
		st.Retries++
		e.metrics.evictions.WithLabelValues("retried").Inc()
		log.Debug().Str("pod", p.Namespace+"/"+p.Name).Msg("eviction refused by a disruption budget; retrying")
		return true
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// gone, or replaced by a pod of the same name: the next listing tells
		return false
	default:
		st.Retries++
		e.metrics.evictions.WithLabelValues("error").Inc()
		log.Warn().Err(err).Str("node", node).Str("pod", p.Namespace+"/"+p.Name).Int32("code", statusCode(err)).
			Str("status_reason", string(apierrors.ReasonForError(err))).Int32("retries", st.Retries).
			Msg("eviction failed; retrying with backoff")
		return true
	}
}

// completeGranted finishes an eviction a PodDisruptionBudget over the pod granted earlier but
// that never deleted the pod, and reports whether it did. The Eviction API records the grant
// in the budget's status.disruptedPods before it deletes the pod: an evicting client that died
// between the two (a terminator killed mid-drain) leaves a budget that counts the pod as gone
// and refuses every other eviction until Kubernetes drops the record two minutes later. Only a
// grant made after the pod was created counts (a pod of the same name made since is not the
// one it was for), and the deletion is the one the Eviction API would have made. budgets holds
// the round's listings by namespace (a namespace's budgets are listed at its first refusal).
func (e *executor) completeGranted(ctx context.Context, node string, p *corev1.Pod, budgets map[string][]policyv1.PodDisruptionBudget,
	st *drainStats, log zerolog.Logger,
) bool {
	listed, ok := budgets[p.Namespace]
	if !ok {
		l, err := e.cs.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			log.Warn().Err(err).Str("pod", p.Namespace+"/"+p.Name).Msg("listing the pod's disruption budgets")
			return false
		}
		listed = l.Items
		budgets[p.Namespace] = listed
	}
	var grant *policyv1.PodDisruptionBudget
	var at time.Time
	for i := range listed {
		b := &listed[i]
		t, ok := b.Status.DisruptedPods[p.Name]
		if !ok || !t.After(p.CreationTimestamp.Time) {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector); err == nil && sel.Matches(labels.Set(p.Labels)) {
			grant, at = b, t.Time
			break
		}
	}
	if grant == nil {
		return false
	}
	uid := p.UID
	err := e.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return true // gone, or replaced by a pod of the same name: the next listing tells
	case err != nil:
		log.Warn().Err(err).Str("pod", p.Namespace+"/"+p.Name).Str("budget", grant.Name).Msg("completing an eviction its disruption budget granted")
		return false
	}
	st.Evicted++
	e.metrics.evictions.WithLabelValues("completed").Inc()
	tellObject(e.events, p, corev1.EventTypeNormal, reasonEvicted, "Evicted pod to drain node "+node+
		" (completing the eviction PodDisruptionBudget "+grant.Name+" granted at "+at.UTC().Format(time.RFC3339)+")")
	log.Info().Str("pod", p.Namespace+"/"+p.Name).Str("budget", grant.Name).Time("granted", at).
		Msg("evicted pod: completed the eviction its disruption budget had granted")
	return true
}

// statusCode is the HTTP status of an API error, 0 if it carries none.
func statusCode(err error) int32 {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return s.Status().Code
	}
	return 0
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
	tellObject(e.events, p, corev1.EventTypeNormal, reasonDisrupted, "Deleted pod: the termination grace period of node "+p.Spec.NodeName+
		" is over (this bypasses the pod's PodDisruptionBudget and karpenter.sh/do-not-disrupt)")
	log.Info().Str("pod", p.Namespace+"/"+p.Name).Msg("deleted pod: termination grace period is over")
}
