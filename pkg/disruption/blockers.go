package disruption

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
)

// Cause is why a node is held back from a voluntary disruption: typed, so metrics, events and
// tests name it without matching words.
type Cause string

const (
	CauseDoNotDisruptNode Cause = "do-not-disrupt-node"
	CauseDoNotDisruptPod  Cause = "do-not-disrupt"
	CausePDB              Cause = "pdb"
	CauseNominated        Cause = "nominated"   // a pending pod waits for the node (a live nomination)
	CauseLaunchLoop       Cause = "launch-loop" // the node was launched for a pod still pending (podproj.LaunchLoopRule)
	CauseBudget           Cause = "budget"
	CauseUnpriced         Cause = "unpriced"
	CauseWouldNotFit      Cause = "pods-would-not-fit"
	CauseNoCheaper        Cause = "no-cheaper-replacement"
	CauseSavings          Cause = "savings-threshold"
	CauseSpot             Cause = "spot"
	CauseOther            Cause = "other"
)

// Block is a node held back, and why in words.
type Block struct {
	Claim, Node string
	Cause       Cause
	Why         string
}

// DoNotDisrupt reports whether a pod's karpenter.sh/do-not-disrupt annotation protects it at
// now, and until when (zero: for as long as it is there), as Karpenter v1 reads it: "true"
// protects it; a duration ("5m", "1h") protects it for that long after the pod started (a pod
// not started yet is protected); any other value protects nothing, and err says why so the
// caller can tell the user. Without it, v1alpha5's karpenter.sh/do-not-evict: "true" protects.
func DoNotDisrupt(p *corev1.Pod, now time.Time) (protected bool, until time.Time, err error) {
	v, ok := p.Annotations[karpv1.DoNotDisruptAnnotationKey]
	if !ok {
		// v1alpha5's name for it (Karpenter v0.32 read both), which pods of clusters migrated
		// from Karpenter v0.2x still carry.
		return p.Annotations[v1alpha5.DoNotEvictPodAnnotationKey] == "true", time.Time{}, nil
	}
	if v == "true" {
		return true, time.Time{}, nil
	}
	d, perr := time.ParseDuration(v)
	if perr != nil || d <= 0 {
		return false, time.Time{}, fmt.Errorf("pod %s/%s: %s=%q is neither \"true\" nor a positive duration: it protects nothing",
			p.Namespace, p.Name, karpv1.DoNotDisruptAnnotationKey, v)
	}
	if p.Status.StartTime == nil {
		return true, time.Time{}, nil
	}
	until = p.Status.StartTime.Add(d)
	return now.Before(until), until, nil
}

// NodeDoNotDisrupt reports whether the node is annotated karpenter.sh/do-not-disrupt: "true".
func NodeDoNotDisrupt(n *corev1.Node) bool {
	return n != nil && n.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true"
}

// PodActive reports a pod that is neither finished nor on its way out.
func PodActive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// Blocker says why pods on a node keep a voluntary disruption from going ahead now, or nothing
// (ok false): a karpenter.sh/do-not-disrupt annotation still in force on any active pod
// (DaemonSet and mirror pods too, as Karpenter), or a PodDisruptionBudget that allows no
// eviction of one of the pods a disruption would evict (movable), or more than one budget over
// one pod (the Eviction API refuses those). bad collects annotations that protect nothing.
func Blocker(pods, movable []*corev1.Pod, pdbs []*policyv1.PodDisruptionBudget, now time.Time, bad func(error)) (Cause, string, bool) {
	for _, p := range pods {
		if !PodActive(p) {
			continue
		}
		protected, until, err := DoNotDisrupt(p, now)
		if err != nil && bad != nil {
			bad(err)
		}
		if protected {
			why := fmt.Sprintf("pod %s/%s is annotated %s", p.Namespace, p.Name, karpv1.DoNotDisruptAnnotationKey)
			if !until.IsZero() {
				why += " until " + until.UTC().Format(time.RFC3339)
			}
			return CauseDoNotDisruptPod, why, true
		}
	}
	for _, p := range movable {
		var over []string
		var stopped *policyv1.PodDisruptionBudget
		for _, b := range pdbs {
			if Selects(b, p) {
				over = append(over, b.Namespace+"/"+b.Name)
				if b.Status.DisruptionsAllowed <= 0 && stopped == nil {
					stopped = b
				}
			}
		}
		switch {
		case len(over) > 1:
			return CausePDB, fmt.Sprintf("pod %s/%s is covered by more than one PodDisruptionBudget (%s): the Eviction API refuses it",
				p.Namespace, p.Name, strings.Join(over, ", ")), true
		case stopped != nil:
			return CausePDB, fmt.Sprintf("PodDisruptionBudget %s/%s allows no disruption of pod %s/%s", stopped.Namespace, stopped.Name, p.Namespace, p.Name), true
		}
	}
	return "", "", false
}

// Selects reports whether a PodDisruptionBudget covers the pod, with Kubernetes' policy/v1
// semantics: same namespace, and its selector matches — an empty selector ({}) selects every pod
// of the namespace, a missing one none.
func Selects(b *policyv1.PodDisruptionBudget, p *corev1.Pod) bool {
	if b.Namespace != p.Namespace || b.Spec.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(p.Labels))
}
