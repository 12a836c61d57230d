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
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/service"
	"github.com/fleetwright/fleetwright/pkg/telemetry"
)

// Keys the terminator reads and writes besides Karpenter's own.
const (
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
	// CapacityType is the claim's karpenter.sh/capacity-type (spot, on-demand).
	CapacityType string
	Grace        *time.Duration // terminationGracePeriod; nil waits for the drain
}

// kube reads the cluster from the shared informer cache and writes straight to the API server.
type kube struct {
	registrationTTL time.Duration

	cache  *clusterstate.Cache
	nodes  writer[*corev1.Node]
	claims writer[*unstructured.Unstructured]
}

func newKube(rt *service.Runtime, registrationTTL time.Duration) (*kube, error) {
	dyn, err := dynamic.NewForConfig(rt.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("creating dynamic client: %w", err)
	}
	c, err := clusterstate.New(rt.Kube, dyn, clusterstate.Want{Pods: clusterstate.AllPods, Nodes: true, NodeClaims: true, Pools: true}, rt.Log)
	if err != nil {
		return nil, err
	}
	nodes, claims := writers(rt.Kube, dyn)
	return &kube{registrationTTL: registrationTTL, cache: c, nodes: nodes, claims: claims}, nil
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
		InstanceID: ec2v1.InstanceID(nc.Status.ProviderID), Pool: clusterstate.PoolOf(nc.Labels), CapacityType: nc.Labels[karpv1.CapacityTypeLabelKey]}
	if g := nc.Spec.TerminationGracePeriod; g != nil {
		d := g.Duration
		r.Grace = &d
	}
	return r
}

// claimOfInstance finds the NodeClaim running an instance.
func (k *kube) claimOfInstance(id string) (claimRef, bool) {
	nc, ok := k.cache.ClaimOfInstance(id)
	if !ok {
		return claimRef{}, false
	}
	return refOf(nc), true
}

// candidates describes every launched NodeClaim for the liveness stage and the finalizers.
func (k *kube) candidates() []candidate {
	var out []candidate
	for _, nc := range k.cache.Claims() {
		if nc.Status.ProviderID == "" {
			continue
		}
		c := candidate{claimRef: refOf(nc), RegisterBy: registerBy(nc, k.registrationTTL), Disrupting: nc.DeletionTimestamp != nil,
			ClaimUnfinalized: nc.Status.NodeName != "" && nc.DeletionTimestamp == nil && !finalized(nc),
			TraceParent:      nc.Annotations[telemetry.TraceAnnotation]}
		if c.NodeName != "" {
			node, ok := k.cache.Node(c.NodeName)
			if !ok {
				continue // not cached yet, or gone
			}
			c.NodeUnfinalized = node.DeletionTimestamp == nil && !finalized(node)
			c.Disrupting = c.Disrupting || node.DeletionTimestamp != nil
		}
		out = append(out, c)
	}
	return out
}

func hasDisruptedTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return true
		}
	}
	return false
}
