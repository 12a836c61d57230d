package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	emuclient "github.com/fleetwright/fleetwright/tools/awsemu/client"
)

// The invariants every fault test checks at its end, and the soak every second. A fault may
// slow the system down; it may never make it do one of these.
const (
	// DuplicateInstance: two live instances for one NodeClaim.
	DuplicateInstance = "duplicate instance"
	// OrphanedInstance: a live instance of this cluster whose NodeClaim is gone, older than
	// the garbage collector's window.
	OrphanedInstance = "orphaned instance"
	// PodLost: a pod of the watched namespaces not Running (checked only when Final).
	PodLost = "pod lost"
	// PDBViolated: a pod covered by a PodDisruptionBudget is being deleted while the budget
	// already has no healthy pod to spare.
	PDBViolated = "PDB violated"
	// NodeLeftTainted: a Node keeps the karpenter.sh/disrupted taint while its NodeClaim is
	// not being deleted (checked only when Final: during a drain the taint is expected).
	NodeLeftTainted = "node left tainted"
)

// Violation is one broken invariant, with what broke it.
type Violation struct {
	Kind   string
	Detail string
}

func (v Violation) String() string { return v.Kind + ": " + v.Detail }

// InvariantOptions say what a check covers.
type InvariantOptions struct {
	// Namespaces whose pods must all be Running when Final (none: no pod check).
	Namespaces []string
	// GCWindow is how old an instance without a NodeClaim may be before it is an orphan
	// (the terminator's --gc-grace plus an interval; the e2e stack's is 30 s + 5 s).
	GCWindow time.Duration
	// Final is the check at the end of a test, once the system has settled: pods must run
	// and no node may stay tainted.
	Final bool
}

// Violations reads the cluster and the emulator once and returns every broken invariant.
// It takes plain clients, not a Stack, so tools (the soak) check the same rules.
func Violations(ctx context.Context, c client.Client, emu *emuclient.Client, opt InvariantOptions) ([]Violation, error) {
	var out []Violation
	var claims karpv1.NodeClaimList
	if err := c.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	claimDeleting := map[string]bool{}
	claimOfNode := map[string]string{}
	for _, nc := range claims.Items {
		claimDeleting[nc.Name] = nc.DeletionTimestamp != nil
		if nc.Status.NodeName != "" {
			claimOfNode[nc.Status.NodeName] = nc.Name
		}
	}
	insts, err := emu.Instances(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	perClaim := map[string][]string{}
	for _, i := range insts {
		if i.State != "running" && i.State != "pending" {
			continue
		}
		claim := ""
		for _, tag := range i.Tags {
			if tag.Key == ec2v1.TagNodeClaim {
				claim = tag.Value
			}
		}
		if claim == "" {
			continue // not launched by a node autoscaler
		}
		perClaim[claim] = append(perClaim[claim], i.ID)
		if _, ok := claimDeleting[claim]; !ok && opt.GCWindow > 0 && time.Since(i.LaunchTime) > opt.GCWindow {
			out = append(out, Violation{OrphanedInstance, fmt.Sprintf("%s (claim %s, launched %s ago)", i.ID, claim, time.Since(i.LaunchTime).Round(time.Second))})
		}
	}
	for claim, ids := range perClaim {
		if len(ids) > 1 {
			out = append(out, Violation{DuplicateInstance, fmt.Sprintf("claim %s has %s", claim, strings.Join(ids, ", "))})
		}
	}

	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.List(ctx, &pdbs); err != nil {
		return nil, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	for _, pdb := range pdbs.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Status.ObservedGeneration == 0 {
			continue
		}
		// Healthy is counted here, not read from status (the disruption controller's view
		// lags): a deleting pod is no longer healthy.
		healthy, deleting := 0, []string{}
		for _, p := range pods.Items {
			if p.Namespace != pdb.Namespace || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if p.DeletionTimestamp != nil {
				deleting = append(deleting, p.Name)
				continue
			}
			if podReady(&p) {
				healthy++
			}
		}
		if len(deleting) > 0 && healthy < int(pdb.Status.DesiredHealthy) {
			out = append(out, Violation{PDBViolated, fmt.Sprintf("%s/%s: %d healthy of %d desired while %s deleting",
				pdb.Namespace, pdb.Name, healthy, pdb.Status.DesiredHealthy, strings.Join(deleting, ", "))})
		}
	}
	if !opt.Final {
		return out, nil
	}
	for _, p := range pods.Items {
		if slices.Contains(opt.Namespaces, p.Namespace) && (p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil) {
			out = append(out, Violation{PodLost, fmt.Sprintf("%s/%s is %s on %q", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName)})
		}
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if n.DeletionTimestamp != nil || !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.DisruptedTaintKey }) {
			continue
		}
		claim := claimOfNode[n.Name]
		if deleting, ok := claimDeleting[claim]; !ok || !deleting {
			out = append(out, Violation{NodeLeftTainted, fmt.Sprintf("%s (claim %q)", n.Name, claim)})
		}
	}
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// AssertInvariants waits up to settle for the final invariants to hold (pods come up, the
// garbage collector reaps) and fails the test with every violation still there.
func (s *Stack) AssertInvariants(t testing.TB, namespaces []string, settle time.Duration) {
	t.Helper()
	opt := InvariantOptions{Namespaces: namespaces, GCWindow: 35 * time.Second, Final: true}
	var last []Violation
	deadline := time.Now().Add(settle)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		v, err := Violations(ctx, s.Client, s.Emu, opt)
		cancel()
		require.NoError(t, err)
		if len(v) == 0 {
			return
		}
		last = v
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for _, v := range last {
		t.Errorf("invariant broken: %s", v)
	}
}
