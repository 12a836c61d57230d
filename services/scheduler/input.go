package main

import (
	"fmt"
	"maps"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// This file gathers the scheduling core's Input from the cluster view: existing nodes with
// their pods, in-flight NodeClaims with the pods nominated to them, DaemonSets, pools and the
// catalog minus unavailable offerings.

// view is one consistent read of everything a solve needs.
type view struct {
	pools      []poolView // by weight, heaviest first, then name
	notReady   []string   // pools left out because their node class is not Ready, with why
	claims     []claimState
	nodes      []*corev1.Node
	daemonSets []*appsv1.DaemonSet
	types      []scheduling.InstanceType
	zoneIDs    map[string]string // zone to topology.k8s.aws/zone-id, from the node classes' subnets
	byName     map[string]*scheduling.InstanceType
	// histories are the launch-loop records of the workloads claims were launched for.
	histories map[string]podproj.LaunchHistory
}

// pool finds a pool by name.
func (v view) pool(name string) (poolView, bool) {
	for _, p := range v.pools {
		if p.core.Name == name {
			return p, true
		}
	}
	return poolView{}, false
}

// input converts the view, the nodes read from it (s.nodes) and the pods to place into the
// core's Input.
func (s *scheduler) input(v view, nodes []scheduling.Node, pods []scheduling.Pod) scheduling.Input {
	in := scheduling.Input{
		Pods:             pods,
		InstanceTypes:    v.types,
		Unavailable:      s.unavailable.Current(),
		Clock:            s.now,
		MaxInstanceTypes: s.cfg.MaxInstanceTypes,
		NewID:            placeholderNames(),
		PreferencePolicy: s.cfg.PreferencePolicy,
		ZoneIDs:          v.zoneIDs,
	}
	for _, p := range v.pools {
		in.NodePools = append(in.NodePools, p.core)
	}
	for _, ds := range v.daemonSets {
		in.DaemonSets = append(in.DaemonSets, scheduling.DaemonSet{Namespace: ds.Namespace, Name: ds.Name,
			Pod: corePod(podproj.Project(s.cluster.DaemonSetPod(ds), s.cluster.Volumes))})
	}
	in.Nodes = nodes
	return in
}

// gather reads the two halves of a solve's input in Karpenter's order: the nodes with their
// pods first, then the pending pods. A pod that binds in between is then counted once at most
// (on its node if the node read saw it bound, else as pending or not at all), never both on a
// node and as pending, which would plan capacity for a pod that already has some.
func gather[N, P any](nodes func() N, pending func() P) (N, P) {
	n := nodes()
	return n, pending()
}

// stillPending keeps the batch's pods that the cache still shows pending, as the same pod.
func (s *scheduler) stillPending(pods []scheduling.Pod) []scheduling.Pod {
	out := pods[:0:0]
	for _, p := range pods {
		if cur, ok := s.cluster.Pod(p.Namespace, p.Name); ok && string(cur.UID) == p.UID {
			if pending, _, _ := s.cfg.Early.Pending(cur, s.now()); pending {
				out = append(out, p)
			}
		}
	}
	return out
}

// placeholderNames names planned claims until the API server names them (generateName).
func placeholderNames() func() string {
	n := 0
	return func() string {
		n++
		return fmt.Sprintf("planned-%d", n)
	}
}

// nodes converts registered nodes and in-flight NodeClaims (claims no node has registered
// for yet) into the core's nodes, each with its pods.
func (s *scheduler) nodes(v view) []scheduling.Node {
	byProvider, byNode := map[string]*claimState{}, map[string]*claimState{}
	for i := range v.claims {
		c := &v.claims[i]
		if c.ProviderID != "" {
			byProvider[c.ProviderID] = c
		}
		if c.NodeName != "" {
			byNode[c.NodeName] = c
		}
	}
	registered := map[string]bool{}
	var out []scheduling.Node
	for _, n := range v.nodes {
		claim := byNode[n.Name]
		if claim == nil && n.Spec.ProviderID != "" {
			claim = byProvider[n.Spec.ProviderID]
		}
		if claim != nil {
			registered[claim.Name] = true
		}
		out = append(out, s.existingNode(n, claim))
	}
	for i := range v.claims {
		c := &v.claims[i]
		if !registered[c.Name] {
			out = append(out, s.inFlightNode(c, v))
		}
	}
	return out
}

func (s *scheduler) existingNode(n *corev1.Node, claim *claimState) scheduling.Node {
	out := scheduling.Node{
		Name: n.Name, NodePool: nodePoolOf(n.Labels), Labels: n.Labels,
		Allocatable:       podproj.CoreResources(n.Status.Allocatable),
		Capacity:          podproj.CoreResources(n.Status.Capacity),
		MarkedForDeletion: n.DeletionTimestamp != nil || n.Spec.Unschedulable || (claim != nil && claim.Deleting),
	}
	var ignore []corev1.Taint
	if claim != nil && !claim.Initialized {
		ignore = claim.StartupTaints // another agent removes them once the node is ready
	}
	for _, t := range n.Spec.Taints {
		if ephemeralTaint(t) || containsTaint(ignore, t) {
			continue
		}
		out.Taints = append(out.Taints, scheduling.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	for _, p := range s.cluster.PodsOn(n.Name) {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out.Pods = append(out.Pods, corePod(podproj.Project(p, s.cluster.Volumes)))
	}
	// Pods nominated to the node's claim that kube-scheduler has not bound yet hold their room
	// while the nomination does: a later batch is not planned onto room promised to them.
	if claim != nil {
		for _, p := range s.liveNominations(claim.Name) {
			out.Pods = append(out.Pods, nominatedPod(p, s.cluster.Volumes))
		}
		s.noRoomIfRecordsFull(&out, claim.Name)
	}
	return out
}

// noRoomIfRecordsFull leaves no room on a node whose claim's nomination records have spent
// their budget (podproj.NominationBudget): a pod planned there could not be nominated to it.
func (s *scheduler) noRoomIfRecordsFull(n *scheduling.Node, claim string) {
	if !podproj.NominationsFull(s.recordsSize(claim)) {
		return
	}
	alloc := maps.Clone(n.Allocatable)
	if alloc == nil {
		alloc = scheduling.ResourceList{}
	}
	alloc[scheduling.ResourcePods] = 0
	n.Allocatable = alloc
}

// inFlightNode is a NodeClaim not registered yet, holding the pods whose nomination to it is
// live. Until launched, its allocatable is the smallest among its possible types (under its
// pool's node settings); the core charges it its pool's DaemonSet overhead, as those pods will
// land on it too.
func (s *scheduler) inFlightNode(c *claimState, v view) scheduling.Node {
	out := scheduling.Node{Name: c.Name, NodePool: c.NodePool, InFlight: true, MarkedForDeletion: c.Deleting,
		Labels: map[string]string{}}
	for _, r := range c.Requirements {
		if r.GetOperator() == string(corev1.NodeSelectorOpIn) && len(r.GetValues()) == 1 {
			out.Labels[r.GetKey()] = r.GetValues()[0]
		}
	}
	for k, v := range c.Labels {
		out.Labels[k] = v
	}
	for _, t := range c.Taints {
		out.Taints = append(out.Taints, scheduling.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	for _, p := range s.liveNominations(c.Name) {
		out.Pods = append(out.Pods, nominatedPod(p, s.cluster.Volumes))
	}
	out.Allocatable, out.Capacity = podproj.CoreResources(c.Allocatable), podproj.CoreResources(c.Capacity)
	if len(c.Allocatable) == 0 {
		var ns *scheduling.NodeSettings
		if p, ok := v.pool(c.NodePool); ok {
			ns = p.core.Node
		}
		out.Allocatable, out.Capacity = optionBounds(requirementValues(c.Requirements, scheduling.LabelInstanceType), v.byName, ns)
	}
	s.noRoomIfRecordsFull(&out, c.Name)
	return out
}

// optionBounds returns the smallest allocatable and the largest capacity among the types,
// under the node settings (nil: the types' own).
func optionBounds(names []string, types map[string]*scheduling.InstanceType, ns *scheduling.NodeSettings) (alloc, capacity scheduling.ResourceList) {
	alloc, capacity = scheduling.ResourceList{}, scheduling.ResourceList{}
	first := true
	for _, name := range names {
		t, ok := types[name]
		if !ok {
			continue
		}
		c, a, err := t.Resources(ns)
		if err != nil {
			c, a = t.Capacity, t.Allocatable()
		}
		for n, q := range a {
			if cur, ok := alloc[n]; first || (ok && q < cur) {
				alloc[n] = q
			}
		}
		if !first {
			for n := range alloc {
				if _, ok := a[n]; !ok {
					delete(alloc, n)
				}
			}
		}
		for n, q := range c {
			capacity[n] = max(capacity[n], q)
		}
		first = false
	}
	return alloc, capacity
}

// nodePoolOf names the pool a node belongs to (v1 label, or the v1alpha5 provisioner's).
func nodePoolOf(labels map[string]string) string {
	if p := labels[scheduling.LabelNodePool]; p != "" {
		return p
	}
	return labels[scheduling.LabelProvisionerName]
}

// ephemeralTaint reports taints the node lifecycle puts on and takes off by itself, and the
// launcher's karpenter.sh/unregistered, which it lifts when it links the node to its claim (a
// batch in between must not plan a second node for pods the first can take).
func ephemeralTaint(t corev1.Taint) bool {
	switch t.Key {
	case corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, "node.cloudprovider.kubernetes.io/uninitialized", karpv1.UnregisteredTaintKey:
		return true
	}
	return false
}

func containsTaint(ts []corev1.Taint, t corev1.Taint) bool {
	for _, o := range ts {
		if o.Key == t.Key && o.Value == t.Value && o.Effect == t.Effect {
			return true
		}
	}
	return false
}

// sortPools orders pools as the core tries them: heaviest weight first, then by name.
func sortPools(pools []poolView) {
	sort.SliceStable(pools, func(i, j int) bool {
		if pools[i].core.Weight != pools[j].core.Weight {
			return pools[i].core.Weight > pools[j].core.Weight
		}
		return pools[i].core.Name < pools[j].core.Name
	})
}
