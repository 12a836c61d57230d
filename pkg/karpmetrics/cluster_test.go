package karpmetrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func resources(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

// testNode is a node of pool "default" made at t0, allocating 4 cpu and 16Gi of its 4 cpu and 17Gi.
func testNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0), Labels: map[string]string{
			"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "spot", "node.kubernetes.io/instance-type": "m5.xlarge",
			"topology.kubernetes.io/zone": "us-west-2a", "kubernetes.io/arch": "amd64", "karpenter.k8s.aws/instance-cpu": "4",
			"karpenter.k8s.aws/ec2nodeclass": "default", // not one of Karpenter's metric labels
		}},
		Status: corev1.NodeStatus{Phase: corev1.NodeRunning, Capacity: resources("4", "17Gi"), Allocatable: resources("4", "16Gi")},
	}
}

type podOpt func(*corev1.Pod)

func testPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func requesting(cpu, memory string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: resources(cpu, memory), Limits: resources(cpu, memory)}
	}
}

func ownedBy(kind, name string) podOpt {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, Controller: &yes}}
	}
}

// on binds the pod to node and runs it; it is Ready at readyAt (never if zero).
func on(node string, readyAt time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.NodeName = node
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(t0.Add(time.Second))})
		if !readyAt.IsZero() {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(readyAt)})
		}
	}
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func observedCluster(t *testing.T, in ClusterInput) (*Cluster, *prometheus.Registry, map[string]family) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	c := NewCluster()
	reg.MustRegister(c)
	c.Observe(in)
	return c, reg, gather(t, reg)
}

func TestClusterNodeGaugesAreKarpenters(t *testing.T) {
	node := testNode("n1")
	web := testPod("web-1", requesting("1500m", "2Gi"), ownedBy("ReplicaSet", "web-abc"), on("n1", t0.Add(5*time.Second)))
	agent := testPod("agent-1", requesting("500m", "1Gi"), ownedBy("DaemonSet", "agent"), on("n1", t0.Add(2*time.Second)))
	done := testPod("job-1", requesting("2", "4Gi"), on("n1", time.Time{}), phase(corev1.PodSucceeded))
	_, _, got := observedCluster(t, ClusterInput{Now: t0.Add(time.Hour),
		Nodes: []ClusterNode{{Node: node, Pods: []*corev1.Pod{web, agent, done}}}, Pods: []*corev1.Pod{web, agent, done}})

	alloc := got["karpenter_nodes_allocatable"]
	require.Equal(t, "GAUGE", alloc.Type)
	wantLabels := []string{"arch", "capacity_reservation_id", "capacity_reservation_interruptible", "capacity_reservation_type",
		"capacity_type", "instance_accelerator_count", "instance_accelerator_manufacturer", "instance_accelerator_name",
		"instance_capability_flex", "instance_category", "instance_cpu", "instance_cpu_manufacturer", "instance_cpu_sustained_clock_speed_mhz",
		"instance_ebs_bandwidth", "instance_encryption_in_transit_supported", "instance_family", "instance_generation", "instance_gpu_count",
		"instance_gpu_manufacturer", "instance_gpu_memory", "instance_gpu_name", "instance_hypervisor", "instance_local_nvme", "instance_memory",
		"instance_network_bandwidth", "instance_size", "instance_tenancy", "instance_type", "managed", "node_name", "nodepool", "os",
		"phase", "placement_group_id", "placement_group_partition", "region", "resource_type", "windows_build", "zone", "zone_id"}
	require.Equal(t, wantLabels, alloc.labelNames(), "Karpenter's well-known labels with the AWS provider's, and no others")

	cpu := map[string]string{"node_name": "n1", "resource_type": "cpu"}
	s := alloc.find(t, cpu)
	require.Equal(t, 4.0, s.Value, "cpu in cores")
	require.Equal(t, map[string]string{"nodepool": "default", "capacity_type": "spot", "instance_type": "m5.xlarge", "zone": "us-west-2a",
		"arch": "amd64", "instance_cpu": "4", "managed": "true", "phase": "Running"},
		pick(s.Labels, "nodepool", "capacity_type", "instance_type", "zone", "arch", "instance_cpu", "managed", "phase"))
	require.Equal(t, float64(16<<30), alloc.find(t, map[string]string{"resource_type": "memory"}).Value, "memory in bytes")

	require.Equal(t, 2.0, got["karpenter_nodes_total_pod_requests"].find(t, cpu).Value, "web and the agent; the finished job holds nothing")
	require.Equal(t, 2.0, got["karpenter_nodes_total_pod_limits"].find(t, cpu).Value)
	require.Equal(t, 0.5, got["karpenter_nodes_total_daemon_requests"].find(t, cpu).Value)
	require.Equal(t, 0.5, got["karpenter_nodes_total_daemon_limits"].find(t, cpu).Value)
	overhead := got["karpenter_nodes_system_overhead"]
	require.Equal(t, 0.0, overhead.find(t, cpu).Value)
	require.Equal(t, float64(1<<30), overhead.find(t, map[string]string{"resource_type": "memory"}).Value)
	require.Equal(t, 3600.0, got["karpenter_nodes_current_lifetime_seconds"].find(t, map[string]string{"node_name": "n1"}).Value)

	util := got["karpenter_cluster_utilization_percent"]
	require.Equal(t, []string{"resource_type"}, util.labelNames())
	require.Equal(t, 50.0, util.find(t, map[string]string{"resource_type": "cpu"}).Value)
	require.InDelta(t, 100*3.0/16, util.find(t, map[string]string{"resource_type": "memory"}).Value, 1e-9)
}

// pick returns the named labels only.
func pick(labels map[string]string, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		out[n] = labels[n]
	}
	return out
}

func TestClusterPodGaugesAreKarpenters(t *testing.T) {
	node := testNode("n1")
	web := testPod("web-1", ownedBy("ReplicaSet", "web-abc"), on("n1", t0.Add(5*time.Second)))
	starting := testPod("web-2", ownedBy("ReplicaSet", "web-abc"), on("n1", time.Time{}))
	pending := testPod("web-3")
	_, _, got := observedCluster(t, ClusterInput{Now: t0.Add(time.Minute),
		Nodes: []ClusterNode{{Node: node, Pods: []*corev1.Pod{web, starting}}}, Pods: []*corev1.Pod{web, starting, pending}})

	state := got["karpenter_pods_state"]
	require.Equal(t, "GAUGE", state.Type)
	require.Equal(t, []string{"arch", "capacity_type", "instance_type", "managed", "name", "namespace", "node", "nodepool", "owner",
		"phase", "ready", "scheduled", "zone"}, state.labelNames())
	require.Equal(t, map[string]string{"name": "web-1", "namespace": "web", "owner": "/apis/apps/v1/namespaces/web/replicasets/web-abc",
		"node": "n1", "scheduled": "true", "nodepool": "default", "zone": "us-west-2a", "arch": "amd64", "capacity_type": "spot",
		"instance_type": "m5.xlarge", "phase": "Running", "ready": "true", "managed": "true"},
		state.find(t, map[string]string{"name": "web-1"}).Labels)
	unbound := state.find(t, map[string]string{"name": "web-3"})
	require.Equal(t, 1.0, unbound.Value)
	require.Equal(t, map[string]string{"node": "", "scheduled": "false", "nodepool": "", "managed": "false", "phase": "Pending", "ready": "false"},
		pick(unbound.Labels, "node", "scheduled", "nodepool", "managed", "phase", "ready"))

	unstarted := got["karpenter_pods_unstarted_time_seconds"]
	require.Len(t, unstarted.Samples, 2, "web-2 runs but is not Ready, web-3 is pending; web-1 started")
	require.Equal(t, 60.0, unstarted.find(t, map[string]string{"name": "web-2", "namespace": "web"}).Value)
	notBound := got["karpenter_pods_unbound_time_seconds"]
	require.Len(t, notBound.Samples, 1)
	require.Equal(t, 60.0, notBound.find(t, map[string]string{"name": "web-3"}).Value)
}

func TestClusterPoolGaugesAndReplacement(t *testing.T) {
	pool := ClusterPool{Name: "default", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7500m"),
		"nvidia.com/gpu": resource.MustParse("2")}, Limits: resources("100", "400Gi")}
	c, reg, got := observedCluster(t, ClusterInput{Now: t0, Nodes: []ClusterNode{{Node: testNode("n1")}}, Pools: []ClusterPool{pool}})
	usage := got["karpenter_nodepools_usage"]
	require.Equal(t, []string{"nodepool", "resource_type"}, usage.labelNames())
	require.Equal(t, 7.5, usage.find(t, map[string]string{"nodepool": "default", "resource_type": "cpu"}).Value)
	require.Equal(t, 2.0, usage.find(t, map[string]string{"resource_type": "nvidia.com/gpu"}).Value)
	require.Equal(t, float64(400<<30), got["karpenter_nodepools_limit"].find(t, map[string]string{"resource_type": "memory"}).Value)

	c.Observe(ClusterInput{Now: t0})
	got = gather(t, reg)
	require.NotContains(t, got, "karpenter_nodes_allocatable", "a node gone has no series left")
	require.NotContains(t, got, "karpenter_nodepools_usage")

	c.Observe(ClusterInput{Now: t0, Pools: []ClusterPool{pool}})
	c.Clear()
	require.Empty(t, gather(t, reg), "a replica that stops leading serves nothing")
}

func TestCatalogGauges(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c := NewCatalog()
	reg.MustRegister(c)
	c.Observe([]CatalogType{{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, Offerings: []CatalogOffering{
		{Zone: "us-west-2a", CapacityType: "spot", PriceUSDPerHour: 0.04, Available: false},
		{Zone: "us-west-2a", CapacityType: "spot", PriceUSDPerHour: 0.04, Available: true},
		{Zone: "us-west-2a", CapacityType: "on-demand", PriceUSDPerHour: 0.096, Available: true},
	}}})
	got := gather(t, reg)
	require.Equal(t, 2.0, got["karpenter_cloudprovider_instance_type_cpu_cores"].find(t, map[string]string{"instance_type": "m5.large"}).Value)
	require.Equal(t, float64(8<<30), got["karpenter_cloudprovider_instance_type_memory_bytes"].find(t, map[string]string{"instance_type": "m5.large"}).Value)
	available := got["karpenter_cloudprovider_instance_type_offering_available"]
	require.Equal(t, []string{"capacity_type", "instance_type", "zone"}, available.labelNames())
	require.Len(t, available.Samples, 2, "one series per type, capacity type and zone")
	require.Equal(t, 1.0, available.find(t, map[string]string{"capacity_type": "spot"}).Value, "available if any listing says so")
	require.Equal(t, 0.096, got["karpenter_cloudprovider_instance_type_offering_price_estimate"].find(t,
		map[string]string{"capacity_type": "on-demand", "zone": "us-west-2a"}).Value)
}
