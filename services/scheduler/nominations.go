package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// endUnfulfillable ends the nominations a ready node can no longer honour, and drops the records
// that no longer matter. kube-scheduler does not read nominations: when a claim's node comes up
// it may bind pods planned for other claims there, and the pods planned for this one no longer
// fit. Waiting out the nomination grace would cost a round of it per node; instead, for each
// initialized claim, the pods still nominated to it are fitted, oldest nomination first, into
// what its bound pods leave of the node's allocatable, and those that do not fit are marked
// ended on the claim (PodNomination.Ended, with the reason); so are those that fit its room but
// that kube-scheduler tried on the node, once it took pods, and could not place (refusedOn:
// anti-affinity, topology spread, affinity against the pods placed there). pod-watcher offers them again at
// once, and their next solve counts the room the node really has. On every claim, the record of
// a pod that is gone, bound or finished, or nominated since to another claim, is removed, so a
// long-lived claim does not collect one per pod it ever waited for. Each claim costs at most one
// JSON patch, each edit guarded by a test of the value read (an edit meanwhile wins).
func (s *scheduler) endUnfulfillable(ctx context.Context) error {
	var errs []error
	for _, nc := range s.cluster.Claims() {
		c := podproj.ClaimOf(nc)
		if c.Deleting {
			continue
		}
		var edits []nominationEdit
		ended := 0
		var misfit podproj.Misfit
		misfitted := false
		if node, ok := s.cluster.Node(c.NodeName); ok && !c.ReadyAt.IsZero() {
			live := s.liveNominations(c.Name)
			overflow := s.overflow(node, live)
			misfit, misfitted = s.misfitFor(nc, node, overflow)
			for _, pod := range live {
				n, ok := s.cluster.NominationOn(nc, string(pod.UID))
				if !ok {
					continue // nominated moments ago, not cached yet: the next round
				}
				switch {
				case misfitted && slices.Contains(overflow, pod) && slices.Contains(misfit.Workloads, podproj.WorkloadOf(pod)):
					n.Ended = fmt.Sprintf("nodeclaim/%s was launched for it, but %s", c.Name, misfit.Why)
				case slices.Contains(overflow, pod):
					n.Ended = fmt.Sprintf("its node %s (nodeclaim/%s) has no room left for it: kube-scheduler placed other pods there", node.Name, c.Name)
				case s.refusedOn(nc, node, pod, n):
					n.Ended = fmt.Sprintf("kube-scheduler tried it on its node %s (nodeclaim/%s) once the node took pods, and could not place it there "+
						"(an affinity, anti-affinity or topology spread constraint against the pods placed there: see the pod's PodScheduled condition)", node.Name, c.Name)
				default:
					continue
				}
				edits = append(edits, nominationEdit{uid: n.UID, was: nc.Annotations[podproj.NominationKey(n.UID)], now: &n})
				ended++
			}
		}
		if misfitted {
			if err := s.recordMisfit(ctx, nc, misfit); err != nil {
				errs = append(errs, err)
			}
		}
		for _, n := range s.cluster.NominationsOn(nc) {
			if s.stale(n) {
				edits = append(edits, nominationEdit{uid: n.UID, was: nc.Annotations[podproj.NominationKey(n.UID)]})
			}
		}
		if len(edits) == 0 {
			continue
		}
		switch applied, err := s.editNominations(ctx, c.Name, edits); {
		case err != nil:
			errs = append(errs, err)
		case applied:
			s.metrics.nominationsEndedEarly.Add(float64(ended))
		}
	}
	return errors.Join(errs...)
}

// refusedOn reports whether kube-scheduler tried the nominated pod with the claim's node up for
// it, and could not place it: the node takes pods (takesPods) and the pod's Unschedulable
// condition was rewritten after the node last changed in what kube-scheduler filters on, and
// after the nomination (whose record keeps whole seconds: a second later, to be sure). That
// rewrite comes from an attempt that saw the node as it is: kube-scheduler writes a failure before
// its next attempt, and when the node became able to take pods it moved the pod back into its
// queue, so a failure it judged on the node before that is followed by one judged after (the
// node's reason in the message changed). The room the node has is the overflow's to judge; this
// catches what it does not: anti-affinity, topology spread, affinity to the pods placed there.
func (s *scheduler) refusedOn(nc *karpv1.NodeClaim, node *corev1.Node, pod *corev1.Pod, n podproj.PodNomination) bool {
	return takesPods(nc, node) && s.attempts.refusedSince(pod.UID, node.Name, n.At.Add(time.Second))
}

// nominationCheckGap is the least time between the end of a nomination check and one a change
// starts: under a scale-out's churn the check runs once every 2 s, as it did on a clock.
const nominationCheckGap = 2 * time.Second

// stale reports whether a claim's record of a nomination no longer matters: its pod is gone,
// replaced, bound or finished, or was nominated to another claim since.
func (s *scheduler) stale(n podproj.PodNomination) bool {
	ns, name, _ := strings.Cut(n.Pod, "/")
	pod, ok := s.cluster.Pod(ns, name)
	switch {
	case !ok, string(pod.UID) != n.UID, pod.Spec.NodeName != "",
		pod.Status.Phase == corev1.PodSucceeded, pod.Status.Phase == corev1.PodFailed:
		return true
	}
	latest := s.cluster.NominationOf(n.UID)
	return latest.Claim != n.Claim && latest.Supersedes(n)
}

// overflow returns the nominated pods that do not fit in what the node's bound pods leave of
// its allocatable, fitting the oldest nominations first.
func (s *scheduler) overflow(node *corev1.Node, nominated []*corev1.Pod) []*corev1.Pod {
	if len(nominated) == 0 {
		return nil
	}
	free := podproj.CoreResources(node.Status.Allocatable)
	for _, p := range s.cluster.PodsOn(node.Name) {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			take(free, podproj.Requests(p))
		}
	}
	at := make(map[types.UID]time.Time, len(nominated)) // judged once per pod, not per comparison
	for _, p := range nominated {
		at[p.UID] = s.nomination(p).At
	}
	sort.SliceStable(nominated, func(i, j int) bool {
		ai, aj := at[nominated[i].UID], at[nominated[j].UID]
		if !ai.Equal(aj) {
			return ai.Before(aj)
		}
		return nominated[i].Namespace+"/"+nominated[i].Name < nominated[j].Namespace+"/"+nominated[j].Name
	})
	var out []*corev1.Pod
	for _, p := range nominated {
		req := podproj.Requests(p)
		if fits(req, free) {
			take(free, req)
		} else {
			out = append(out, p)
		}
	}
	return out
}

func fits(req map[string]int64, free scheduling.ResourceList) bool {
	for n, q := range req {
		if q > free[n] {
			return false
		}
	}
	return true
}

func take(free scheduling.ResourceList, req map[string]int64) {
	for n, q := range req {
		free[n] -= q
	}
}

// nominationEdit changes the record of the pod with this UID on a claim: to now, or away (now
// nil), provided it still reads was.
type nominationEdit struct {
	uid, was string
	now      *podproj.PodNomination
}

// editNominations applies the edits to the claim in one JSON patch, each after a test of the
// value it was decided on; applied is false when a record changed meanwhile (the patch is
// refused whole; the next round decides again) or the claim is gone.
func (s *scheduler) editNominations(ctx context.Context, claim string, edits []nominationEdit) (applied bool, err error) {
	ops := make([]map[string]string, 0, 2*len(edits))
	for _, e := range edits {
		path := "/metadata/annotations/" + strings.ReplaceAll(podproj.NominationKey(e.uid), "/", "~1") // JSON pointer; keys hold no "~"
		ops = append(ops, map[string]string{"op": "test", "path": path, "value": e.was})
		if e.now != nil {
			ops = append(ops, map[string]string{"op": "replace", "path": path, "value": e.now.Value()})
		} else {
			ops = append(ops, map[string]string{"op": "remove", "path": path})
		}
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return false, fmt.Errorf("encoding patch: %w", err)
	}
	wctx, done, err := s.fence(ctx, "nomination_end")
	if err != nil {
		return false, err
	}
	defer done()
	_, err = s.claims.Patch(wctx, claim, types.JSONPatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsInvalid(err), apierrors.IsConflict(err):
		return false, nil // gone, or a record changed meanwhile (a test failed)
	case err != nil:
		return false, fmt.Errorf("editing %d nomination record(s) on nodeclaim %s: %w", len(edits), claim, err)
	}
	return true, nil
}
