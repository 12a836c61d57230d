package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/tools/localcluster"
)

// dumpTail is how much of each control-plane component's log a failed test prints.
const dumpTail = 3000

// dumpState prints what a failed test left in the cluster: every node, pod, budget and claim
// in a line each, whether a control-plane component exited, and the tails of the logs of the
// components that act on pods (the controllers, kube-scheduler, kwok). A CI log often shows
// only its end, and the service logs do not tell why a pod never ran.
func (s *Stack) dumpState() {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Fprintf(&b, "---- cluster state at the end (%s) ----\n", time.Now().UTC().Format(time.RFC3339Nano))
	if err := s.Cluster.Healthy(); err != nil {
		fmt.Fprintf(&b, "control plane: %v\n", err)
	}
	if nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "nodes: %v\n", err)
	} else {
		for _, n := range nodes.Items {
			var taints []string
			for _, t := range n.Spec.Taints {
				taints = append(taints, t.Key+":"+string(t.Effect))
			}
			fmt.Fprintf(&b, "node %s unschedulable=%t ready=%s taints=%v created=%s deleting=%t\n", n.Name, n.Spec.Unschedulable,
				nodeReady(&n), taints, n.CreationTimestamp.UTC().Format(time.TimeOnly), n.DeletionTimestamp != nil)
		}
	}
	if pods, err := s.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "pods: %v\n", err)
	} else {
		for _, p := range pods.Items {
			if p.Namespace == metav1.NamespaceSystem {
				continue
			}
			fmt.Fprintf(&b, "pod %s/%s node=%q phase=%s ready=%s created=%s deleting=%t scheduled=%s\n", p.Namespace, p.Name,
				p.Spec.NodeName, p.Status.Phase, podCondition(&p, corev1.PodReady), p.CreationTimestamp.UTC().Format(time.TimeOnly),
				p.DeletionTimestamp != nil, podCondition(&p, corev1.PodScheduled))
		}
	}
	if pdbs, err := s.Kube.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "budgets: %v\n", err)
	} else {
		for _, d := range pdbs.Items {
			st := d.Status
			fmt.Fprintf(&b, "pdb %s/%s healthy=%d/%d expected=%d allowed=%d observed=%d/%d\n", d.Namespace, d.Name,
				st.CurrentHealthy, st.DesiredHealthy, st.ExpectedPods, st.DisruptionsAllowed, st.ObservedGeneration, d.Generation)
		}
	}
	var claims karpv1.NodeClaimList
	if err := s.Client.List(ctx, &claims); err != nil {
		fmt.Fprintf(&b, "nodeclaims: %v\n", err)
	} else {
		for _, c := range claims.Items {
			var conds []string
			for _, cond := range c.Status.Conditions {
				conds = append(conds, cond.Type+"="+string(cond.Status))
			}
			fmt.Fprintf(&b, "nodeclaim %s node=%q provider=%q conditions=%v created=%s deleting=%t\n", c.Name, c.Status.NodeName,
				c.Status.ProviderID, conds, c.CreationTimestamp.UTC().Format(time.TimeOnly), c.DeletionTimestamp != nil)
		}
	}
	for _, name := range []string{localcluster.KubeControllerManager, localcluster.KubeScheduler, localcluster.Kwok} {
		log, err := os.ReadFile(filepath.Join(s.Cluster.LogDir, name+".log"))
		if err != nil {
			fmt.Fprintf(&b, "---- %s log: %v\n", name, err)
			continue
		}
		if len(log) > dumpTail {
			log = append([]byte("…"), log[len(log)-dumpTail:]...)
		}
		fmt.Fprintf(&b, "---- %s log, its end ----\n%s\n", name, log)
	}
	s.t.Log(b.String())
}

func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return "none"
}

// podCondition is a pod condition's status, with its reason when it has one.
func podCondition(p *corev1.Pod, t corev1.PodConditionType) string {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			if c.Reason != "" {
				return string(c.Status) + "(" + c.Reason + ")"
			}
			return string(c.Status)
		}
	}
	return "none"
}
