package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
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
	for _, section := range []struct {
		what  string
		lines func(context.Context) ([]string, error)
	}{{"nodes", s.nodeLines}, {"pods", s.podLines}, {"budgets", s.budgetLines}, {"nodeclaims", s.claimLines}} {
		lines, err := section.lines(ctx)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", section.what, err)
		}
		for _, l := range lines {
			b.WriteString(l + "\n")
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

func (s *Stack) nodeLines(ctx context.Context) ([]string, error) {
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return render(nodes.Items, func(n *corev1.Node) string {
		var taints []string
		for _, t := range n.Spec.Taints {
			taints = append(taints, t.Key+":"+string(t.Effect))
		}
		return fmt.Sprintf("node %s unschedulable=%t ready=%s taints=%v created=%s deleting=%t", n.Name, n.Spec.Unschedulable,
			nodeReady(n), taints, n.CreationTimestamp.UTC().Format(time.TimeOnly), n.DeletionTimestamp != nil)
	}), nil
}

func (s *Stack) podLines(ctx context.Context) ([]string, error) {
	pods, err := s.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return render(pods.Items, func(p *corev1.Pod) string {
		if p.Namespace == metav1.NamespaceSystem {
			return ""
		}
		return fmt.Sprintf("pod %s/%s node=%q phase=%s ready=%s created=%s deleting=%t scheduled=%s", p.Namespace, p.Name,
			p.Spec.NodeName, p.Status.Phase, podCondition(p, corev1.PodReady), p.CreationTimestamp.UTC().Format(time.TimeOnly),
			p.DeletionTimestamp != nil, podCondition(p, corev1.PodScheduled))
	}), nil
}

func (s *Stack) budgetLines(ctx context.Context) ([]string, error) {
	pdbs, err := s.Kube.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return render(pdbs.Items, func(d *policyv1.PodDisruptionBudget) string {
		st := d.Status
		return fmt.Sprintf("pdb %s/%s healthy=%d/%d expected=%d allowed=%d observed=%d/%d disrupted=%d", d.Namespace, d.Name,
			st.CurrentHealthy, st.DesiredHealthy, st.ExpectedPods, st.DisruptionsAllowed, st.ObservedGeneration, d.Generation, len(st.DisruptedPods))
	}), nil
}

func (s *Stack) claimLines(ctx context.Context) ([]string, error) {
	var claims karpv1.NodeClaimList
	if err := s.Client.List(ctx, &claims); err != nil {
		return nil, err
	}
	return render(claims.Items, func(c *karpv1.NodeClaim) string {
		var conds []string
		for _, cond := range c.Status.Conditions {
			conds = append(conds, cond.Type+"="+string(cond.Status))
		}
		return fmt.Sprintf("nodeclaim %s node=%q provider=%q conditions=%v created=%s deleting=%t", c.Name, c.Status.NodeName,
			c.Status.ProviderID, conds, c.CreationTimestamp.UTC().Format(time.TimeOnly), c.DeletionTimestamp != nil)
	}), nil
}

// render formats each item on a line of its own; an item formatted as "" is left out.
func render[T any](items []T, format func(*T) string) []string {
	var out []string
	for i := range items {
		if l := format(&items[i]); l != "" {
			out = append(out, l)
		}
	}
	return out
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
