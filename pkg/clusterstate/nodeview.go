package clusterstate

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// PoolOf names the pool a NodeClaim or Node belongs to, from its labels: the karpenter.sh/v1
// NodePool's, or a v1alpha5 Provisioner's (translated under the same name by Pools). The one
// reading of a claim's pool.
func PoolOf(labels map[string]string) string {
	if p := labels[karpv1.NodePoolLabelKey]; p != "" {
		return p
	}
	return labels[scheduling.LabelProvisionerName]
}

// NodeView is one NodeClaim joined with what belongs to it: its Node (nil until it registers,
// or once gone), its pool (nil if the pool is gone or unknown) and the pods bound to its node.
// The one join of claims, nodes, pools and pods every service reads disruption and
// termination from.
type NodeView struct {
	Claim *karpv1.NodeClaim
	Node  *corev1.Node
	Pool  *Pool
	Pods  []*corev1.Pod
}

// Name is the claim's name.
func (v NodeView) Name() string { return v.Claim.Name }

// NodeName is the node's name ("" before it registers).
func (v NodeView) NodeName() string {
	if v.Node != nil {
		return v.Node.Name
	}
	return v.Claim.Status.NodeName
}

// PoolName is the pool the claim belongs to (PoolOf its labels).
func (v NodeView) PoolName() string { return PoolOf(v.Claim.Labels) }

// NodeViews joins every cached NodeClaim with its node, pool and pods, by claim name. The cache
// must hold NodeClaims and nodes; pools and pods are joined when it holds them.
func (c *Cache) NodeViews() []NodeView {
	pools := map[string]*Pool{}
	if c.NodePools != nil {
		for _, p := range c.Pools() {
			pools[p.Name] = &p
		}
	}
	claims := c.Claims()
	out := make([]NodeView, 0, len(claims))
	for _, nc := range claims {
		v := NodeView{Claim: nc, Pool: pools[PoolOf(nc.Labels)]}
		if name := nc.Status.NodeName; name != "" {
			if n, ok := c.Node(name); ok {
				v.Node = n
			}
			if c.Pods != nil {
				v.Pods = c.PodsOn(name)
			}
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b NodeView) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}
