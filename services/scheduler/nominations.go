package main

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// endUnfulfillable ends the nominations a ready node can no longer honour. kube-scheduler does
// not read nominations: when a claim's node comes up it may bind pods planned for other claims
// there, and the pods planned for this one no longer fit. Waiting out the nomination grace would
// cost a round of it per node; instead, for each initialized claim, the pods still nominated to
// it are fitted, oldest nomination first, into what its bound pods leave of the node's
// allocatable, and those that do not fit are marked ended on the claim (PodNomination.Ended,
// with the reason; one patch per claim). pod-watcher offers them again at once, and their next solve counts the room the node
// really has.
func (s *scheduler) endUnfulfillable(ctx context.Context) error {
	var errs []error
	for _, nc := range s.cluster.Claims() {
		c := podproj.ClaimOf(nc)
		if c.ReadyAt.IsZero() || c.Deleting || c.NodeName == "" {
			continue
		}
		node, ok := s.cluster.Node(c.NodeName)
		if !ok {
			continue
		}
		var ended []podproj.PodNomination
		for _, pod := range s.overflow(node, s.liveNominations(c.Name)) {
			ended = append(ended, podproj.PodNomination{UID: string(pod.UID), Pod: pod.Namespace + "/" + pod.Name, At: s.nomination(pod).At,
				Ended: fmt.Sprintf("its node %s (nodeclaim/%s) has no room left for it: kube-scheduler placed other pods there", node.Name, c.Name)})
		}
		if len(ended) > 0 {
			if err := s.endNominations(ctx, c.Name, ended); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
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
	sort.SliceStable(nominated, func(i, j int) bool {
		ai, aj := s.nomination(nominated[i]).At, s.nomination(nominated[j]).At
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

// endNominations records on the claim that these nominations to it ended and why: a merge
// patch of the pods' keys, which leaves its other nominations alone. A claim gone meanwhile ends
// them anyway.
func (s *scheduler) endNominations(ctx context.Context, claim string, ended []podproj.PodNomination) error {
	wctx, done, err := s.fence(ctx, "nomination_end")
	if err != nil {
		return err
	}
	defer done()
	_, err = s.claims.Patch(wctx, claim, types.MergePatchType, podproj.NominationPatch(ended), metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("ending %d nomination(s) to nodeclaim %s: %w", len(ended), claim, err)
	}
	s.metrics.nominationsEndedEarly.Add(float64(len(ended)))
	return nil
}
