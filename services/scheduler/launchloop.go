package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// The launch-loop breaker (podproj.LaunchLoopRule): a claim records the workloads it is launched
// for and the DaemonSet overhead it was planned with; the nomination check records when its ready
// node could not hold a pod it was launched for (a misfit); a workload whose launches misfit
// --max-failed-launches times gets no new node for --failed-launch-hold after the latest.

// heldBack splits off the pods whose workload the breaker holds, and tells each why.
func (s *scheduler) heldBack(pods []scheduling.Pod, kube map[string]*corev1.Pod, v view, log zerolog.Logger) []scheduling.Pod {
	now := s.now()
	out := pods[:0:0]
	held := 0
	for _, p := range pods {
		pod := kube[p.UID]
		if pod == nil {
			out = append(out, p)
			continue
		}
		h := v.histories[podproj.WorkloadOf(pod)]
		stop, until := s.cfg.LaunchLoop.Held(h, now)
		if !stop {
			out = append(out, p)
			continue
		}
		held++
		why := launchLoopMessage(h, until)
		failedScheduling(s.recorder, pod, why)
		if held <= 10 {
			log.Warn().Str("pod", pod.Namespace+"/"+pod.Name).Str("nodeclaim", h.Latest).Str("reason", why).Msg("launch loop: not launching a node for pod")
		}
	}
	s.metrics.launchLoopHeld.Add(float64(held))
	return out
}

// launchLoopMessage says why no node is launched for a held workload's pod.
func launchLoopMessage(h podproj.LaunchHistory, until time.Time) string {
	last := ""
	if h.LatestMisfit != "" {
		last = fmt.Sprintf(" (the last, nodeclaim/%s: %s)", h.Latest, h.LatestMisfit)
	}
	return fmt.Sprintf("not launching another node for it: %d node(s) launched for its workload came up and did not hold it%s; "+
		"one more is tried after %s (--max-failed-launches, --failed-launch-hold)", h.Failed, last, until.UTC().Format(time.RFC3339))
}

// launchRecord annotates a claim about to be made with the workloads it is launched for, each
// with its failed launches so far, and the DaemonSet overhead it is planned with.
func launchRecord(nc *karpv1.NodeClaim, pods []*corev1.Pod, overhead scheduling.ResourceList, histories map[string]podproj.LaunchHistory) {
	if len(pods) == 0 {
		return
	}
	prior := map[string]int{}
	for _, p := range pods {
		w := podproj.WorkloadOf(p)
		prior[w] = histories[w].Failed
	}
	nc.Annotations[podproj.LaunchedForAnnotation] = podproj.LaunchedFor(prior)
	b, _ := json.Marshal(podproj.KubeResources(overhead)) // quantities: cannot fail
	nc.Annotations[podproj.OverheadAnnotation] = string(b)
}

// misfit says why a ready node did not hold what its claim was planned for ("" when it did, and
// the room went to other pods): it registered less allocatable than the claim's requests, or
// the DaemonSet and static pods bound to it ask for more than the overhead planned.
func misfit(nc *karpv1.NodeClaim, node *corev1.Node, bound []*corev1.Pod) string {
	var short []string
	for name, want := range nc.Spec.Resources.Requests {
		if have, ok := node.Status.Allocatable[name]; ok && have.Cmp(want) < 0 {
			short = append(short, fmt.Sprintf("%s %s allocatable where %s was planned", have.String(), name, want.String()))
		}
	}
	if len(short) > 0 {
		return "its node " + node.Name + " registered " + strings.Join(short, ", ")
	}
	var planned corev1.ResourceList
	if json.Unmarshal([]byte(nc.Annotations[podproj.OverheadAnnotation]), &planned) != nil {
		return "" // made before overhead was recorded: nothing to compare
	}
	actual := corev1.ResourceList{}
	for _, p := range bound {
		if !podproj.StaysWithNode(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for name, q := range podproj.KubeResources(podproj.Requests(p)) {
			if name == corev1.ResourcePods {
				continue
			}
			cur := actual[name]
			cur.Add(q)
			actual[name] = cur
		}
	}
	for name, got := range actual {
		if want := planned[name]; got.Cmp(want) > 0 {
			short = append(short, fmt.Sprintf("%s %s where %s was planned", got.String(), name, want.String()))
		}
	}
	if len(short) > 0 {
		return "the DaemonSet pods on its node " + node.Name + " ask for " + strings.Join(short, ", ") + " (admission changed them, or DaemonSets came after the plan)"
	}
	return ""
}

// misfitFor is why the claim's ready node did not hold pods it was launched for, among those that
// overflow it, with their workloads (ok false if none overflows, it was launched for none of them,
// the room went to other pods, or its misfit is recorded already).
func (s *scheduler) misfitFor(nc *karpv1.NodeClaim, node *corev1.Node, overflow []*corev1.Pod) (podproj.Misfit, bool) {
	if _, recorded := podproj.MisfitOf(nc); len(overflow) == 0 || recorded {
		return podproj.Misfit{}, false
	}
	var launchedFor map[string]int
	if json.Unmarshal([]byte(nc.Annotations[podproj.LaunchedForAnnotation]), &launchedFor) != nil {
		return podproj.Misfit{}, false
	}
	var m podproj.Misfit
	for _, p := range overflow {
		w := podproj.WorkloadOf(p)
		if _, ok := launchedFor[w]; ok && !slices.Contains(m.Workloads, w) {
			m.Workloads = append(m.Workloads, w)
		}
	}
	if len(m.Workloads) == 0 {
		return podproj.Misfit{}, false
	}
	if m.Why = misfit(nc, node, s.cluster.PodsOn(node.Name)); m.Why == "" {
		return podproj.Misfit{}, false
	}
	sort.Strings(m.Workloads)
	return m, true
}

// recordMisfit records on the claim that its node did not hold what it was launched for: the
// launch-loop breaker counts it.
func (s *scheduler) recordMisfit(ctx context.Context, nc *karpv1.NodeClaim, m podproj.Misfit) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{podproj.MisfitAnnotation: m.Value()}}})
	wctx, done, err := s.fence(ctx, "misfit")
	if err != nil {
		return err
	}
	defer done()
	_, err = s.claims.Patch(wctx, nc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("recording the misfit of nodeclaim %s: %w", nc.Name, err)
	}
	s.metrics.misfits.Inc()
	s.rt.Log.Warn().Ctx(ctx).Str("nodeclaim", nc.Name).Str("reason", m.Why).Msg("launch loop: a node did not hold the pods it was launched for")
	launchMisfit(s.recorder, nc, m.Why)
	return nil
}

// pendingPods are the cached pods podproj.Pending calls pending.
func (s *scheduler) pendingPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range s.cluster.Unbound() {
		if ok, _, _ := s.cfg.Early.Pending(p, s.now()); ok {
			out = append(out, p)
		}
	}
	return out
}
