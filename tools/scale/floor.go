package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FloorLabel marks the floor's nodes; the floor's pods select it, so no NodePool (which does
// not offer it) takes them and only kube-scheduler and kwok are timed.
const FloorLabel = "scale.fleetwright.io/floor"

// floor is the same pods on the same number and shape of nodes, made and Ready beforehand:
// how fast kube-scheduler and kwok alone run them. Each pod is pinned (by hostname) to the twin
// of the node it ran on in the run: kube-scheduler's own spreading would leave some pods of a
// tightly packed fleet without room, and the floor would never finish. placed maps pod names to
// the run's nodes; the nodes and pods are removed after.
func floor(ctx context.Context, tg Target, opts Options, shapes []corev1.Node, placed map[string]string) (time.Duration, error) {
	ns := opts.Namespace + "-floor"
	if err := ensureNamespace(ctx, tg.Kube, ns); err != nil {
		return 0, err
	}
	var names []string
	twin := map[string]string{} // the run's node → its floor node
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		_ = tg.Kube.CoreV1().Pods(ns).DeleteCollection(cctx, metav1.DeleteOptions{GracePeriodSeconds: ptrInt64(0)}, metav1.ListOptions{})
		for _, n := range names {
			_ = tg.Kube.CoreV1().Nodes().Delete(cctx, n, metav1.DeleteOptions{})
		}
	}()
	fmt.Fprintf(opts.Progress, "scale: floor: making %d nodes of the same shapes\n", len(shapes))
	for i, shape := range shapes {
		n := floorNode(fmt.Sprintf("scale-floor-%04d", i), shape)
		if _, err := tg.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return 0, fmt.Errorf("creating floor node: %w", err)
		}
		names = append(names, n.Name)
		twin[shape.Name] = n.Name
	}
	if err := waitAll(ctx, opts, time.Now(), func() (string, bool) {
		ready := 0
		if list, err := tg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: FloorLabel + "=true"}); err == nil {
			for i := range list.Items {
				if nodeReady(&list.Items[i]) {
					ready++
				}
			}
		}
		return fmt.Sprintf("floor nodes ready %d/%d", ready, len(names)), ready == len(names)
	}); err != nil {
		return 0, err
	}
	pods := opts.Mix.Pods(ns, opts.Pods)
	for _, p := range pods {
		p.Spec.NodeSelector = map[string]string{FloorLabel: "true"}
		if n := twin[placed[p.Name]]; n != "" {
			p.Spec.NodeSelector[corev1.LabelHostname] = n
		}
	}
	w, err := watchPods(ctx, tg.Kube, ns)
	if err != nil {
		return 0, err
	}
	defer w.stop()
	start := time.Now()
	if err := createPods(ctx, tg.Kube, pods, opts.Workers); err != nil {
		return 0, err
	}
	var took time.Duration
	err = waitAll(ctx, opts, start, func() (string, bool) {
		st := w.states(nil)
		if st.running == opts.Pods {
			took = time.Since(start)
			return fmt.Sprintf("floor: running %d/%d", st.running, opts.Pods), true
		}
		return fmt.Sprintf("floor: pending %d, bound %d, running %d/%d", st.pending, st.bound, st.running, opts.Pods), false
	})
	return took, err
}

// floorNode is a kwok node with the shape's well-known labels, capacity and allocatable.
func floorNode(name string, shape corev1.Node) *corev1.Node {
	labels := map[string]string{FloorLabel: "true", corev1.LabelHostname: name}
	for k, v := range shape.Labels {
		if k == corev1.LabelTopologyZone || k == corev1.LabelTopologyRegion || k == corev1.LabelInstanceTypeStable ||
			k == corev1.LabelArchStable || k == corev1.LabelOSStable || strings.HasPrefix(k, "karpenter.k8s.aws/") {
			labels[k] = v
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Capacity: shape.Status.Capacity.DeepCopy(), Allocatable: shape.Status.Allocatable.DeepCopy(),
			Phase: corev1.NodeRunning},
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
