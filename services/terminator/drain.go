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

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clock"
	"github.com/fleetwright/fleetwright/pkg/faultpoint"
)

// drainStats counts one delivery's eviction calls.
type drainStats struct {
	Evicted int32 // accepted by the Eviction API
	Retries int32 // refused (429 from a PodDisruptionBudget, or any other error) and retried
	Waiting int   // pods still to go when a delivery's budget ran out
}

// drainRound is what one round of a drain found and did.
type drainRound struct {
	Round    int      // 1 for the first round of a delivery
	Pods     []string // the pods still to go (namespace/name), while there are any
	PodsGone bool     // no pod holds the node any more
	Forced   bool     // the termination deadline passed: volumes are no longer waited for
	Volumes  []string // once the pods are gone, the VolumeAttachments the termination waits for
	// Deleted are the pods this round deleted for the termination deadline (namespace/name).
	Deleted  []string
	Deadline time.Time // the drain's deadline; zero: none
	// Held says, in words, which karpenter.sh/do-not-disrupt pods the drain does not evict and
	// until when it leaves them be; "" when it holds none.
	Held string
}

// Eviction retry pacing: a refused eviction (429, or any other error: a 500 for a pod under
// two budgets, a webhook's denial) is tried again after minBackoff, doubling up to maxBackoff
// while it keeps being refused. A round that finds nothing to do but wait (do-not-disrupt pods
// held, critical pods waiting their turn) backs off the same way, but never past the next
// moment a pod is due to be deleted or stops being protected.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// drain empties the node as Karpenter v1's termination does (see planRound): it evicts the
// pods through the Eviction API, so PodDisruptionBudgets hold, non-critical pods first; leaves
// DaemonSet and mirror pods; leaves karpenter.sh/do-not-disrupt pods be unless pol is an
// interruption's; and deletes each pod at pol.Deadline less its own grace period, with the
// time left as its grace. It returns true once no pod but those is left and no VolumeAttachment
// of the pods it moved names the node any more, false if budget passes first. Past the
// deadline, volumes are no longer waited for. observe, if set, is told what every round found.
func (e *executor) drain(ctx context.Context, node string, pol drainPolicy, budget time.Time, st *drainStats, log zerolog.Logger, observe func(drainRound)) (bool, error) {
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
		past := !pol.Deadline.IsZero() && !now.Before(pol.Deadline)
		plan := planRound(pods.Items, pol, now)
		if len(plan.Steps) == 0 {
			if past {
				observe(drainRound{Round: round, PodsGone: true, Forced: true, Deadline: pol.Deadline})
				return true, nil
			}
			vas, err := e.attachments(ctx, node, pods.Items, now)
			if err != nil {
				return false, err
			}
			observe(drainRound{Round: round, PodsGone: true, Volumes: vas, Deadline: pol.Deadline})
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
		r := drainRound{Round: round, Deadline: pol.Deadline, Held: held(plan, pol.Deadline)}
		refused, busy := false, false                          // busy: something was asked for, or is on its way out
		budgets := map[string][]policyv1.PodDisruptionBudget{} // listed once a round, by namespace
		for _, s := range plan.Steps {
			r.Pods = append(r.Pods, s.Pod.Namespace+"/"+s.Pod.Name)
			switch s.Action {
			case deletePod:
				busy = true
				if e.deleteForDeadline(ctx, s.Pod, s.Grace, pol.Deadline, log) {
					r.Deleted = append(r.Deleted, s.Pod.Namespace+"/"+s.Pod.Name)
				}
			case evictPod:
				busy = true
				refused = e.evict(ctx, node, s.Pod, pol.Reason, budgets, st, log) || refused
			case awaitPod:
				busy = true
			}
		}
		observe(r)
		if e.now().After(budget) {
			st.Waiting = len(plan.Steps)
			log.Info().Str("node", node).Int("pods_left", len(plan.Steps)).Msg("node still draining")
			return false, nil
		}
		wait := minBackoff
		if refused || !busy {
			wait = backoff
			backoff = min(2*backoff, maxBackoff)
		} else {
			backoff = minBackoff
		}
		if !plan.Next.IsZero() {
			wait = min(wait, plan.Next.Sub(now))
		}
		e.pause(ctx, wait)
		if ctx.Err() != nil {
			return false, nil
		}
	}
}

// held says which do-not-disrupt pods a round leaves be, and until when; "" if none.
func held(plan roundPlan, deadline time.Time) string {
	var pods []string
	for _, s := range plan.Steps {
		if s.Action == holdPod {
			pods = append(pods, s.Pod.Namespace+"/"+s.Pod.Name)
		}
	}
	if len(pods) == 0 {
		return ""
	}
	msg := fmt.Sprintf("%d %s annotated %s, not evicted: %s; ", len(pods), plural(len(pods), "pod is", "pods are"),
		karpv1.DoNotDisruptAnnotationKey, listed(pods))
	if deadline.IsZero() {
		return msg + "the NodeClaim has no terminationGracePeriod, so the drain waits for them to go"
	}
	return msg + "they are deleted by the termination grace period's end, " + deadline.UTC().Format(time.RFC3339) + ", each with its own grace period"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// pause waits between drain rounds.
func (e *executor) pause(ctx context.Context, d time.Duration) {
	if e.sleep != nil {
		e.sleep(ctx, d)
		return
	}
	clock.Sleep(ctx, d)
}

// evict asks the Eviction API to evict one pod; it reports whether the eviction was refused
// and is to be retried with backoff: a 429 (a PodDisruptionBudget said no) or any other error
// (a 500 for a pod under two budgets, a webhook's denial, an API server in trouble).
func (e *executor) evict(ctx context.Context, node string, p *corev1.Pod, reason string, budgets map[string][]policyv1.PodDisruptionBudget,
	st *drainStats, log zerolog.Logger,
) bool {
	uid := p.UID
	err := e.cs.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	})
	e.metrics.karp.evicted(err, reason)
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

// deleteForDeadline deletes a pod for the node's termination deadline with grace seconds (the
// time left, at least 1), bypassing its PodDisruptionBudget and karpenter.sh/do-not-disrupt as
// Karpenter does then; it reports whether it did.
func (e *executor) deleteForDeadline(ctx context.Context, p *corev1.Pod, grace int64, deadline time.Time, log zerolog.Logger) bool {
	uid := p.UID
	err := e.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace,
		Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false // gone, or replaced by a pod of the same name: the next listing tells
	case err != nil:
		log.Warn().Err(err).Str("pod", p.Namespace+"/"+p.Name).Msg("deleting pod for the termination grace period's end")
		return false
	}
	e.metrics.evictions.WithLabelValues("forced").Inc()
	tellObject(e.events, p, corev1.EventTypeNormal, reasonDisrupted, fmt.Sprintf(
		"Deleted pod with a grace period of %ds: node %s's termination grace period ends at %s (this bypasses the pod's PodDisruptionBudget and %s)",
		grace, p.Spec.NodeName, deadline.UTC().Format(time.RFC3339), karpv1.DoNotDisruptAnnotationKey))
	log.Info().Str("pod", p.Namespace+"/"+p.Name).Int64("grace_seconds", grace).Time("deadline", deadline).
		Msg("deleted pod: the termination grace period is ending")
	return true
}
