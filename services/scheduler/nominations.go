package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

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
// allocatable, and those that do not fit are marked ended (NominationEndedAnnotation, with the
// reason). pod-watcher offers them again at once, and their next solve counts the room the node
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
		for _, pod := range s.overflow(node, s.liveNominations(c.Name)) {
			why := fmt.Sprintf("its node %s (nodeclaim/%s) has no room left for it: kube-scheduler placed other pods there", node.Name, c.Name)
			if err := s.endNomination(ctx, pod, c.Name, why); err != nil {
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
		_, ai := podproj.NominationOf(nominated[i])
		_, aj := podproj.NominationOf(nominated[j])
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

// endNomination records on the pod that its nomination to the claim ended and why, provided it
// is still nominated to that claim (a JSON patch test), so a newer nomination is never undone.
func (s *scheduler) endNomination(ctx context.Context, pod *corev1.Pod, claim, why string) error {
	path := func(key string) string { return "/metadata/annotations/" + strings.ReplaceAll(key, "/", "~1") }
	patch, err := json.Marshal([]map[string]string{
		{"op": "test", "path": path(podproj.NominationAnnotation), "value": claim},
		{"op": "add", "path": path(podproj.NominationEndedAnnotation), "value": why},
	})
	if err != nil {
		return fmt.Errorf("encoding patch: %w", err)
	}
	wctx, done, err := s.fence(ctx, "nomination_end")
	if err != nil {
		return err
	}
	defer done()
	_, err = s.rt.Kube.CoreV1().Pods(pod.Namespace).Patch(wctx, pod.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsInvalid(err), apierrors.IsConflict(err):
		return nil // gone, or nominated elsewhere meanwhile (the test op failed)
	case err != nil:
		return fmt.Errorf("ending nomination of pod %s/%s to nodeclaim %s: %w", pod.Namespace, pod.Name, claim, err)
	}
	s.metrics.nominationsEndedEarly.Inc()
	return nil
}
