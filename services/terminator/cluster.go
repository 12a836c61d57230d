package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/service"
)

// Keys the terminator reads and writes besides Karpenter's own.
const (
	// emptinessAnnotation is when the node was last seen becoming empty (RFC 3339), as
	// Karpenter v1alpha5 kept it; shared by replicas and kept across restarts.
	emptinessAnnotation = "karpenter.sh/emptiness-timestamp"
	// intentAnnotation names the intent carrying out a NodeClaim's termination, so the
	// sweeper does not start a second one for a deletion the executor made.
	intentAnnotation = "fleetwright.io/termination-intent"
	// progressAnnotation is when the executor last worked on a deleting NodeClaim's
	// termination (RFC 3339); the decider publishes it again once this is stale.
	progressAnnotation = "fleetwright.io/termination-progress"
)

// claimRef is what the terminator needs to know of a NodeClaim to terminate it.
type claimRef struct {
	Name       string
	UID        string
	NodeName   string
	InstanceID string
	ProviderID string
	Pool       string
	Grace      *time.Duration // terminationGracePeriod; nil waits for the drain
}

// kube reads the cluster from the shared informer cache and writes straight to the API server.
type kube struct {
	registrationTTL time.Duration
	nomination      podproj.NominationRule
	launchLoop      podproj.LaunchLoopRule

	cache  *clusterstate.Cache
	nodes  writer[*corev1.Node]
	claims writer[*unstructured.Unstructured]
}

func newKube(rt *service.Runtime, registrationTTL time.Duration, nomination podproj.NominationRule, launchLoop podproj.LaunchLoopRule) (*kube, error) {
	dyn, err := dynamic.NewForConfig(rt.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("creating dynamic client: %w", err)
	}
	c, err := clusterstate.New(rt.Kube, dyn, clusterstate.Want{Pods: clusterstate.AllPods, Nodes: true, NodeClaims: true, Pools: true}, rt.Log)
	if err != nil {
		return nil, err
	}
	nodes, claims := writers(rt.Kube, dyn)
	return &kube{registrationTTL: registrationTTL, nomination: nomination, launchLoop: launchLoop, cache: c, nodes: nodes, claims: claims}, nil
}

// writers are the kube's writers of Nodes and NodeClaims, straight to the API server.
func writers(cs kubernetes.Interface, dyn dynamic.Interface) (writer[*corev1.Node], writer[*unstructured.Unstructured]) {
	nodes, claims := cs.CoreV1().Nodes(), dyn.Resource(clusterstate.NodeClaims)
	return writer[*corev1.Node]{kind: "node", get: nodes.Get, update: nodes.Update, del: nodes.Delete},
		writer[*unstructured.Unstructured]{kind: "nodeclaim",
			get: func(ctx context.Context, name string, o metav1.GetOptions) (*unstructured.Unstructured, error) {
				return claims.Get(ctx, name, o)
			},
			update: func(ctx context.Context, u *unstructured.Unstructured, o metav1.UpdateOptions) (*unstructured.Unstructured, error) {
				return claims.Update(ctx, u, o)
			},
			del: func(ctx context.Context, name string, o metav1.DeleteOptions) error {
				return claims.Delete(ctx, name, o)
			},
			updateStatus: func(ctx context.Context, u *unstructured.Unstructured, o metav1.UpdateOptions) (*unstructured.Unstructured, error) {
				return claims.UpdateStatus(ctx, u, o)
			},
		}
}

// registerBy is when a launched claim's node must have registered; zero once it has.
func registerBy(nc *karpv1.NodeClaim, ttl time.Duration) time.Time {
	launched := nc.Condition(karpv1.ConditionTypeLaunched)
	if nc.IsTrue(karpv1.ConditionTypeRegistered) || launched == nil || launched.Status != metav1.ConditionTrue {
		return time.Time{}
	}
	return launched.LastTransitionTime.Add(ttl)
}

// refOf describes a NodeClaim.
func refOf(nc *karpv1.NodeClaim) claimRef {
	r := claimRef{Name: nc.Name, UID: string(nc.UID), NodeName: nc.Status.NodeName, ProviderID: nc.Status.ProviderID,
		InstanceID: ec2v1.InstanceID(nc.Status.ProviderID), Pool: poolOf(nc.Labels)}
	if g := nc.Spec.TerminationGracePeriod; g != nil {
		d := g.Duration
		r.Grace = &d
	}
	return r
}

// poolOf is the NodePool (or v1alpha5 Provisioner) named by a NodeClaim's or Node's labels.
func poolOf(labels map[string]string) string {
	if p := labels[karpv1.NodePoolLabelKey]; p != "" {
		return p
	}
	return labels[v1alpha5.ProvisionerNameLabelKey]
}

// claimOfInstance finds the NodeClaim running an instance.
func (k *kube) claimOfInstance(id string) (claimRef, bool) {
	nc, ok := k.cache.ClaimOfInstance(id)
	if !ok {
		return claimRef{}, false
	}
	return refOf(nc), true
}

// emptyAfter is how long a pool's nodes may stay empty; nil means forever.
type poolPolicies map[string]*time.Duration

// policies reads each pool's emptiness policy: NodePools' consolidateAfter under WhenEmpty or
// WhenEmptyOrUnderutilized, Provisioners' ttlSecondsAfterEmpty (translated into the v1 model).
func (k *kube) policies() poolPolicies {
	out := poolPolicies{}
	for _, p := range k.cache.Pools() {
		out[p.Name] = emptyAfter(p.Spec.Disruption)
	}
	return out
}

func emptyAfter(d karpv1.Disruption) *time.Duration {
	switch d.ConsolidationPolicy {
	case karpv1.ConsolidationPolicyWhenEmpty, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized:
		return d.ConsolidateAfter.Duration
	}
	return nil
}

// candidates describes every launched NodeClaim for the decision stages.
func (k *kube) candidates(now time.Time) []candidate {
	pols := k.policies()
	claims := k.cache.Claims()
	names := make(map[string]bool, len(claims))
	byName := make(map[string]podproj.Claim, len(claims))
	for _, nc := range claims {
		names[nc.Name] = true
		byName[nc.Name] = podproj.ClaimOf(nc)
	}
	exists := func(name string) bool { return names[name] }
	// A pod the scheduler nominated to a claim and kube-scheduler has not bound yet is on its
	// way: the claim's node is not empty while the nomination is live (podproj's rule, at the
	// settings' bounds: by default 20 s after the node is ready at most), or a node launched for
	// one pod could be emptied before the pod lands on it.
	awaited := map[string]time.Time{} // claim → when the first nomination to it ends by the clock; zero: none does
	lookup := func(name string) (podproj.Claim, bool) { c, ok := byName[name]; return c, ok }
	var pending []*corev1.Pod
	for _, p := range k.cache.Unbound() {
		if !active(p) {
			continue
		}
		if ok, _ := podproj.Pending(p); ok {
			pending = append(pending, p)
		}
		if n := k.nomination.JudgeNomination(k.cache.NominationOf(string(p.UID)), lookup, now); n.Live {
			if until, seen := awaited[n.Claim]; !seen || !n.Expires.IsZero() && (until.IsZero() || n.Expires.Before(until)) {
				awaited[n.Claim] = n.Expires
			}
		}
	}
	// The last node launched for a workload that did not hold its pod stays while the pod is
	// pending (podproj.LaunchLoopRule): emptied away, the next launch for it would loop.
	kept := k.launchLoop.Keeps(podproj.LaunchHistories(claims), pending)
	var out []candidate
	for _, nc := range claims {
		if nc.Status.ProviderID == "" {
			continue
		}
		c := candidate{claimRef: refOf(nc), Created: nc.CreationTimestamp.Time, Initialized: nc.IsTrue(karpv1.ConditionTypeInitialized),
			RegisterBy: registerBy(nc, k.registrationTTL),
			Disrupting: nc.DeletionTimestamp != nil, EmptyAfter: pols[poolOf(nc.Labels)], ExpireAfter: nc.Spec.ExpireAfter.Duration,
			ClaimUnfinalized: nc.Status.NodeName != "" && nc.DeletionTimestamp == nil && !finalized(nc),
			Replacing:        disruption.Replacing(nc, exists)}
		if c.NodeName != "" {
			node, ok := k.cache.Node(c.NodeName)
			if !ok {
				continue // not cached yet, or gone
			}
			describeNode(&c, node, k.cache.PodsOn(node.Name))
			if until, ok := awaited[nc.Name]; ok {
				c.Empty, c.AwaitedUntil = false, until
			}
			if why, ok := kept[nc.Name]; ok {
				c.Empty, c.KeptFor = false, why
			}
		}
		out = append(out, c)
	}
	return out
}

// describeNode fills in what the node and its pods say: disrupting, empty since, blocked.
func describeNode(c *candidate, node *corev1.Node, pods []*corev1.Pod) {
	c.HasNode = true
	c.NodeUnfinalized = node.DeletionTimestamp == nil && !finalized(node)
	c.Disrupting = c.Disrupting || node.DeletionTimestamp != nil || hasDisruptedTaint(node)
	if ts := node.Annotations[emptinessAnnotation]; ts != "" {
		if t, err := time.Parse(time.RFC3339, ts); err == nil {
			c.EmptySince = t
		}
	}
	if node.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
		c.BlockedBy = "node " + node.Name
	}
	c.Empty = true
	for _, p := range pods {
		if !active(p) {
			continue
		}
		if c.BlockedBy == "" && p.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
			c.BlockedBy = "pod " + p.Namespace + "/" + p.Name
		}
		if !podproj.StaysWithNode(p) {
			c.Empty = false
		}
	}
}

// active reports a pod that is neither finished nor on its way out.
func active(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func hasDisruptedTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return true
		}
	}
	return false
}
