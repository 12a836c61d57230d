package karpmetrics

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// Cluster serves Karpenter's gauges of the cluster as one pass last saw it (Karpenter's
// metrics.node, metrics.pod and metrics.nodepool controllers): karpenter_nodes_{allocatable,
// total_pod_requests, total_pod_limits, total_daemon_requests, total_daemon_limits,
// system_overhead, current_lifetime_seconds}, karpenter_cluster_utilization_percent,
// karpenter_pods_state and karpenter_nodepools_{usage, limit}. Each Observe replaces the whole
// snapshot, so a node, pod or pool that is gone has no series left behind; Clear empties it
// (a replica that stops leading serves none, so sum() across replicas counts each node once).
type Cluster struct {
	nodeLabels                                                                  []string
	allocatable, podRequests, podLimits, daemonRequests, daemonLimits, overhead *prometheus.Desc
	lifetime, utilization, podState, poolUsage, poolLimit                       *prometheus.Desc

	mu      sync.Mutex
	samples []prometheus.Metric
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
	Pods  []*corev1.Pod // every pod, bound or not, for karpenter_pods_state
	Pools []ClusterPool
	Now   time.Time
}

// wellKnown maps each well-known label key to Karpenter's metric label name for it: the part
// after the slash, lower case, dashes as underscores (kubernetes.io/arch → arch,
// karpenter.k8s.aws/instance-cpu → instance_cpu).
func wellKnown() map[string]string {
	out := map[string]string{}
	for _, key := range slices.Concat(karpv1.WellKnownLabels, ec2v1.WellKnownLabels) {
		if _, name, ok := strings.Cut(key, "/"); ok {
			out[key] = strings.ReplaceAll(strings.ToLower(name), "-", "_")
		}
	}
	return out
}

// NodeLabelNames are the label names of karpenter_nodes_* (without resource_type), sorted.
func NodeLabelNames() []string {
	names := map[string]bool{"node_name": true, "phase": true, "managed": true}
	for _, n := range wellKnown() {
		names[n] = true
	}
	return slices.Sorted(maps.Keys(names))
}

// PodLabelNames are karpenter_pods_state's label names.
var PodLabelNames = []string{"name", "namespace", "owner", "node", "scheduled", LabelNodePool, LabelZone, "arch",
	LabelCapacityType, "instance_type", "phase", "ready", "managed"}

// NewCluster makes the collector; register it on the service's registry.
func NewCluster() *Cluster {
	nl := NodeLabelNames()
	withType := append(slices.Clone(nl), LabelResourceType)
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Cluster{
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
		poolUsage: d("karpenter_nodepools_usage",
			"The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.", []string{LabelResourceType, LabelNodePool}),
		poolLimit: d("karpenter_nodepools_limit",
			"Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.",
			[]string{LabelResourceType, LabelNodePool}),
	}
}

func (c *Cluster) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.allocatable, c.podRequests, c.podLimits, c.daemonRequests, c.daemonLimits, c.overhead,
		c.lifetime, c.utilization, c.podState, c.poolUsage, c.poolLimit} {
		ch <- d
	}
}

func (c *Cluster) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	samples := c.samples
	c.mu.Unlock()
	for _, s := range samples {
		ch <- s
	}
}

// Clear drops every series.
func (c *Cluster) Clear() {
	c.mu.Lock()
	c.samples = nil
	c.mu.Unlock()
}

// Observe replaces the snapshot with the pass's cluster.
func (c *Cluster) Observe(in ClusterInput) {
	var out []prometheus.Metric
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...))
	}
	wk := wellKnown()
	allocatable, requested := corev1.ResourceList{}, corev1.ResourceList{}
	nodes := map[string]*corev1.Node{}
	for _, n := range in.Nodes {
		if n.Node == nil {
			continue
		}
		nodes[n.Node.Name] = n.Node
		labels := c.nodeLabelValues(n.Node, wk)
		var podReq, podLim, dsReq, dsLim corev1.ResourceList
		for _, p := range n.Pods {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue // no longer holds its requests
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
				gauge(d, value(name, list[name]), append(slices.Clone(labels), resourceType(name))...)
			}
		}
		gauge(c.lifetime, in.Now.Sub(n.Node.CreationTimestamp.Time).Seconds(), labels...)
		allocatable, requested = add(allocatable, n.Node.Status.Allocatable), add(requested, podReq)
	}
	for _, name := range slices.Sorted(maps.Keys(allocatable)) {
		a := allocatable[name]
		if a.IsZero() {
			continue
		}
		r := requested[name]
		gauge(c.utilization, 100*float64(r.MilliValue())/float64(a.MilliValue()), resourceType(name))
	}
	for _, p := range in.Pods {
		gauge(c.podState, 1, podLabelValues(p, nodes[p.Spec.NodeName])...)
	}
	for _, p := range in.Pools {
		for _, name := range slices.Sorted(maps.Keys(p.Usage)) {
			gauge(c.poolUsage, value(name, p.Usage[name]), resourceType(name), p.Name)
		}
		for _, name := range slices.Sorted(maps.Keys(p.Limits)) {
			gauge(c.poolLimit, value(name, p.Limits[name]), resourceType(name), p.Name)
		}
	}
	c.mu.Lock()
	c.samples = out
	c.mu.Unlock()
}

func (c *Cluster) nodeLabelValues(n *corev1.Node, wk map[string]string) []string {
	byName := map[string]string{"node_name": n.Name, "phase": string(n.Status.Phase),
		"managed": strconv.FormatBool(clusterstate.PoolOf(n.Labels) != "")}
	for key, name := range wk {
		byName[name] = n.Labels[key]
	}
	byName[LabelNodePool] = clusterstate.PoolOf(n.Labels) // a v1alpha5 node's Provisioner too
	out := make([]string, len(c.nodeLabels))
	for i, name := range c.nodeLabels {
		out[i] = byName[name]
	}
	return out
}

func podLabelValues(p *corev1.Pod, node *corev1.Node) []string {
	owner := ""
	if len(p.OwnerReferences) > 0 {
		o := p.OwnerReferences[0]
		owner = "/apis/" + o.APIVersion + "/namespaces/" + p.Namespace + "/" + strings.ToLower(o.Kind) + "s/" + o.Name
	}
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	nl := map[string]string{}
	if node != nil {
		nl = node.Labels
	}
	pool := clusterstate.PoolOf(nl)
	return []string{p.Name, p.Namespace, owner, p.Spec.NodeName, strconv.FormatBool(p.Spec.NodeName != ""), pool,
		nl[corev1.LabelTopologyZone], nl[corev1.LabelArchStable], nl[karpv1.CapacityTypeLabelKey], nl[corev1.LabelInstanceTypeStable],
		string(p.Status.Phase), strconv.FormatBool(ready), strconv.FormatBool(pool != "")}
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

// value is Karpenter's: cores for cpu, the plain value for the rest.
func value(name corev1.ResourceName, q resource.Quantity) float64 {
	if name == corev1.ResourceCPU {
		return float64(q.MilliValue()) / 1000
	}
	return float64(q.Value())
}

// resourceType is Karpenter's resource_type value: lower case, dashes as underscores.
func resourceType(name corev1.ResourceName) string {
	return strings.ReplaceAll(strings.ToLower(string(name)), "-", "_")
}
