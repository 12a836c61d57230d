package karpmetrics

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// Cluster serves Karpenter's gauges of the cluster as one pass last saw it (Karpenter's
// metrics.node, metrics.pod and metrics.nodepool controllers): karpenter_nodes_{allocatable,
// total_pod_requests, total_pod_limits, total_daemon_requests, total_daemon_limits,
// system_overhead, current_lifetime_seconds}, karpenter_cluster_utilization_percent,
// karpenter_pods_{state, unstarted_time_seconds, unbound_time_seconds} and
// karpenter_nodepools_{usage, limit}. Each Observe replaces the whole snapshot.
//
// A node's or pod's nodepool is PoolOf its node's labels, so a node of a v1alpha5 Provisioner
// is managed and counted under the Provisioner's name (Karpenter v1 reads karpenter.sh/nodepool
// only; Fleetwright runs both).
type Cluster struct {
	snapshot
	nodeLabels                                                                  []string
	allocatable, podRequests, podLimits, daemonRequests, daemonLimits, overhead *prometheus.Desc
	lifetime, utilization, podState, unstarted, unbound, poolUsage, poolLimit   *prometheus.Desc
}

// ClusterNode is one node and the pods bound to it.
type ClusterNode struct {
	Node *corev1.Node
	Pods []*corev1.Pod
}

// ClusterPool is a NodePool's usage (its status.resources) and limits.
type ClusterPool struct {
	Name          string
	Usage, Limits corev1.ResourceList
}

// ClusterInput is what one pass read.
type ClusterInput struct {
	Nodes []ClusterNode
	Pods  []*corev1.Pod // every pod, bound or not, for karpenter_pods_*
	Pools []ClusterPool
	Now   time.Time
}

// NewCluster makes the collector; register it on the service's registry.
func NewCluster() *Cluster {
	nl := NodeLabelNames()
	withType := append(slices.Clone(nl), LabelResourceType)
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	pool := []string{LabelResourceType, LabelNodePool}
	pod := []string{LabelName, LabelNamespace}
	c := &Cluster{
		nodeLabels:  nl,
		allocatable: d("karpenter_nodes_allocatable", "Node allocatable are the resources allocatable by nodes.", withType),
		podRequests: d("karpenter_nodes_total_pod_requests",
			"Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods.", withType),
		podLimits: d("karpenter_nodes_total_pod_limits",
			"Node total pod limits are the resources specified by pod limits, including the DaemonSet pods.", withType),
		daemonRequests: d("karpenter_nodes_total_daemon_requests",
			"Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.", withType),
		daemonLimits: d("karpenter_nodes_total_daemon_limits", "Node total daemon limits are the resources specified by DaemonSet pod limits.", withType),
		overhead: d("karpenter_nodes_system_overhead",
			"Node system daemon overhead are the resources reserved for system overhead, the difference between the node's capacity and allocatable values are reported by the status.", withType),
		lifetime:    d("karpenter_nodes_current_lifetime_seconds", "Node age in seconds", nl),
		utilization: d("karpenter_cluster_utilization_percent", "Utilization of allocatable resources by pod requests", []string{LabelResourceType}),
		podState: d("karpenter_pods_state",
			"Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod name, namespace, owner, node, nodepool name, zone, architecture, capacity type, instance type, pod phase, and pod readiness.",
			PodLabelNames),
		unstarted: d("karpenter_pods_unstarted_time_seconds", "The time from pod creation until the pod is running.", pod),
		unbound:   d("karpenter_pods_unbound_time_seconds", "The time from pod creation until the pod is bound.", pod),
		poolUsage: d("karpenter_nodepools_usage",
			"The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.", pool),
		poolLimit: d("karpenter_nodepools_limit",
			"Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.", pool),
	}
	c.descs = []*prometheus.Desc{c.allocatable, c.podRequests, c.podLimits, c.daemonRequests, c.daemonLimits, c.overhead,
		c.lifetime, c.utilization, c.podState, c.unstarted, c.unbound, c.poolUsage, c.poolLimit}
	return c
}

// Observe replaces the snapshot with the pass's cluster.
func (c *Cluster) Observe(in ClusterInput) {
	var g gauges
	allocatable, requested := corev1.ResourceList{}, corev1.ResourceList{}
	nodes := map[string]*corev1.Node{}
	for _, n := range in.Nodes {
		if n.Node == nil {
			continue
		}
		nodes[n.Node.Name] = n.Node
		podReq := c.observeNode(&g, n, in.Now)
		allocatable, requested = add(allocatable, n.Node.Status.Allocatable), add(requested, podReq)
	}
	observeUtilization(&g, c.utilization, allocatable, requested)
	for _, p := range in.Pods {
		c.observePod(&g, p, nodes[p.Spec.NodeName], in.Now)
	}
	for _, p := range in.Pools {
		for _, name := range slices.Sorted(maps.Keys(p.Usage)) {
			g.set(c.poolUsage, value(name, p.Usage[name]), resourceType(name), p.Name)
		}
		for _, name := range slices.Sorted(maps.Keys(p.Limits)) {
			g.set(c.poolLimit, value(name, p.Limits[name]), resourceType(name), p.Name)
		}
	}
	c.replace(g)
}

// observeNode adds one node's series and returns its pods' requests. A pod that has finished
// (Succeeded, Failed) holds no requests, as in Karpenter's cluster state.
func (c *Cluster) observeNode(g *gauges, n ClusterNode, now time.Time) corev1.ResourceList {
	labels := c.nodeLabelValues(n.Node)
	var podReq, podLim, dsReq, dsLim corev1.ResourceList
	for _, p := range n.Pods {
		if terminal(p) {
			continue
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		lim := resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})
		podReq, podLim = add(podReq, req), add(podLim, lim)
		if podproj.OwnedBy(p, "DaemonSet") {
			dsReq, dsLim = add(dsReq, req), add(dsLim, lim)
		}
	}
	overhead := corev1.ResourceList{}
	for name, q := range n.Node.Status.Capacity {
		q = q.DeepCopy()
		q.Sub(n.Node.Status.Allocatable[name])
		overhead[name] = q
	}
	for d, list := range map[*prometheus.Desc]corev1.ResourceList{c.allocatable: n.Node.Status.Allocatable, c.podRequests: podReq,
		c.podLimits: podLim, c.daemonRequests: dsReq, c.daemonLimits: dsLim, c.overhead: overhead} {
		for _, name := range slices.Sorted(maps.Keys(list)) {
			g.set(d, value(name, list[name]), append(slices.Clone(labels), resourceType(name))...)
		}
	}
	g.set(c.lifetime, now.Sub(n.Node.CreationTimestamp.Time).Seconds(), labels...)
	return podReq
}

// observeUtilization adds karpenter_cluster_utilization_percent as Karpenter computes it: the
// requests over allocatable, cpu in millicores, the rest in whole units, a resource none of
// whose nodes allocate any left out.
func observeUtilization(g *gauges, d *prometheus.Desc, allocatable, requested corev1.ResourceList) {
	for _, name := range slices.Sorted(maps.Keys(allocatable)) {
		a, r := allocatable[name], requested[name]
		if a.Value() == 0 {
			continue
		}
		ratio := float64(r.Value()) / float64(a.Value())
		if name == corev1.ResourceCPU {
			ratio = float64(r.MilliValue()) / float64(a.MilliValue())
		}
		g.set(d, 100*ratio, resourceType(name))
	}
}

// observePod adds karpenter_pods_state, and the time a pod not yet started (not Ready) or not
// yet bound has waited since its creation. Karpenter sets the last two only for pods its
// controller saw pending; a snapshot sets them for every such pod, which differs only for pods
// that were never pending since the service started.
func (c *Cluster) observePod(g *gauges, p *corev1.Pod, node *corev1.Node, now time.Time) {
	g.set(c.podState, 1, podLabelValues(p, node)...)
	if terminal(p) {
		return
	}
	waited := now.Sub(p.CreationTimestamp.Time).Seconds()
	if _, ready := condition(p, corev1.PodReady); !ready {
		g.set(c.unstarted, waited, p.Name, p.Namespace)
	}
	if _, bound := condition(p, corev1.PodScheduled); p.Status.Phase == corev1.PodPending && !bound {
		g.set(c.unbound, waited, p.Name, p.Namespace)
	}
}

func (c *Cluster) nodeLabelValues(n *corev1.Node) []string {
	pool := clusterstate.PoolOf(n.Labels)
	byName := map[string]string{"node_name": n.Name, "phase": string(n.Status.Phase), "managed": strconv.FormatBool(pool != "")}
	for _, key := range nodeLabelKeys {
		byName[metricLabelName(key)] = n.Labels[key]
	}
	byName[LabelNodePool] = pool
	out := make([]string, len(c.nodeLabels))
	for i, name := range c.nodeLabels {
		out[i] = byName[name]
	}
	return out
}

// podLabelValues are karpenter_pods_state's labels, in PodLabelNames' order; owner is the
// self link Karpenter builds from the first owner reference.
func podLabelValues(p *corev1.Pod, node *corev1.Node) []string {
	owner := ""
	if len(p.OwnerReferences) > 0 {
		o := p.OwnerReferences[0]
		owner = "/apis/" + o.APIVersion + "/namespaces/" + p.Namespace + "/" + strings.ToLower(o.Kind) + "s/" + o.Name
	}
	_, ready := condition(p, corev1.PodReady)
	var nl map[string]string
	if node != nil {
		nl = node.Labels
	}
	pool := clusterstate.PoolOf(nl)
	return []string{p.Name, p.Namespace, owner, p.Spec.NodeName, strconv.FormatBool(p.Spec.NodeName != ""), pool,
		nl[corev1.LabelTopologyZone], nl[corev1.LabelArchStable], nl[karpv1.CapacityTypeLabelKey], nl[corev1.LabelInstanceTypeStable],
		string(p.Status.Phase), strconv.FormatBool(ready), strconv.FormatBool(pool != "")}
}

// condition returns the pod's condition of type t and whether it is True.
func condition(p *corev1.Pod, t corev1.PodConditionType) (corev1.PodCondition, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c, c.Status == corev1.ConditionTrue
		}
	}
	return corev1.PodCondition{}, false
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func add(into, from corev1.ResourceList) corev1.ResourceList {
	if into == nil {
		into = corev1.ResourceList{}
	}
	for name, q := range from {
		sum := into[name].DeepCopy()
		sum.Add(q)
		into[name] = sum
	}
	return into
}
