package awsemu

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"

	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/userdata"
)

// Over the whole catalog, the node an instance registers has the capacity and allocatable the
// scheduler planned with: nominal memory less the VM overhead, kube-reserved and eviction
// thresholds taken off, GPUs and accelerators counted.
func TestRegisteredCapacityIsWhatTheSchedulerPlans(t *testing.T) {
	types := catalog.Schedulable()
	planned := scheduling.FromCatalog(types, nil)
	require.Len(t, planned, len(types))
	for i, ct := range types {
		node := NodeSpec{Name: "n", Type: ct}.Node()
		for name, want := range planned[i].Allocatable() {
			got := node.Status.Allocatable[corev1.ResourceName(name)]
			value := got.Value()
			if name == scheduling.ResourceCPU {
				value = got.MilliValue()
			}
			if !assert.Equal(t, want, value, "%s %s allocatable", ct.Name, name) {
				return
			}
		}
		assert.Len(t, node.Status.Allocatable, len(planned[i].Capacity), ct.Name)
	}
	m5 := NodeSpec{Name: "n", Type: mustType(t, "m5.large")}.Node()
	assert.Equal(t, "7577Mi", m5.Status.Capacity.Memory().String(), "8 GiB less 7.5% kept by the hypervisor and kernel")
	p3 := NodeSpec{Name: "n", Type: mustType(t, "p3.2xlarge")}.Node()
	gpus := p3.Status.Allocatable["nvidia.com/gpu"]
	assert.Equal(t, int64(1), gpus.Value(), "a GPU node registers its GPU")
}

// nodeClass is what a test node class says about its nodes, in EC2NodeClass terms.
type nodeClass struct {
	name    string
	family  string
	kubelet *ec2v1.KubeletConfiguration
	bdms    []*ec2v1.BlockDeviceMapping
	raid0   bool
}

func gib(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func dev(name, size string, root bool) *ec2v1.BlockDeviceMapping {
	return &ec2v1.BlockDeviceMapping{DeviceName: &name, EBS: &ec2v1.BlockDevice{VolumeSize: gib(size)}, RootVolume: root}
}

func i32(v int32) *int32 { return &v }

var nodeClasses = []nodeClass{
	{name: "defaults", family: "AL2023"},
	{name: "AL2 maxPods, reservations, eviction, 100Gi root", family: "AL2", kubelet: &ec2v1.KubeletConfiguration{
		MaxPods: i32(10), SystemReserved: map[string]string{"cpu": "100m", "memory": "200Mi", "ephemeral-storage": "1Gi"},
		KubeReserved: map[string]string{"cpu": "250m", "memory": "1Gi"},
		EvictionHard: map[string]string{"memory.available": "5%", "nodefs.available": "15%"}},
		bdms: []*ec2v1.BlockDeviceMapping{dev("/dev/xvda", "100Gi", false)}},
	{name: "Bottlerocket data volume, soft eviction", family: "Bottlerocket", kubelet: &ec2v1.KubeletConfiguration{
		MaxPods: i32(50), EvictionHard: map[string]string{"memory.available": "200Mi"},
		EvictionSoft: map[string]string{"memory.available": "1Gi"}, EvictionSoftGracePeriod: map[string]metav1.Duration{"memory.available": {Duration: time.Minute}}},
		bdms: []*ec2v1.BlockDeviceMapping{dev("/dev/xvda", "4Gi", false), dev("/dev/xvdb", "80Gi", false)}},
	{name: "AL2023 RAID0, podsPerCore, decimal root size", family: "AL2023", raid0: true,
		kubelet: &ec2v1.KubeletConfiguration{PodsPerCore: i32(4), ClusterDNS: []string{"10.0.0.10"}},
		bdms:    []*ec2v1.BlockDeviceMapping{dev("/dev/xvda", "100G", true)}},
	{name: "AL2 RAID0 and kube-reserved storage", family: "AL2", raid0: true,
		kubelet: &ec2v1.KubeletConfiguration{KubeReserved: map[string]string{"ephemeral-storage": "5Gi"}, MaxPods: i32(200)}},
}

// registered is the node an instance of the class registers: user data rendered as the
// launcher renders it, the volumes on its template, read back by the emulator.
func registered(t *testing.T, c nodeClass, ct catalog.InstanceType) *corev1.Node {
	t.Helper()
	o := userdata.Options{ClusterName: "demo-cluster", Labels: map[string]string{"karpenter.sh/nodepool": "p"}}
	if k := c.kubelet; k != nil {
		o.Kubelet = userdata.Kubelet{MaxPods: k.MaxPods, PodsPerCore: k.PodsPerCore, SystemReserved: k.SystemReserved,
			KubeReserved: k.KubeReserved, EvictionHard: k.EvictionHard, EvictionSoft: k.EvictionSoft, ClusterDNS: k.ClusterDNS}
		if c.family == "Bottlerocket" {
			o.Kubelet.PodsPerCore = nil
		}
	}
	if c.raid0 {
		o.InstanceStorePolicy = userdata.RAID0
	}
	doc, err := userdata.Render(userdata.Family(c.family), o)
	require.NoError(t, err)
	ks, err := parseKubeletSettings(doc)
	require.NoError(t, err)
	var devs []BlockDevice
	for _, d := range clusterstate.BlockDevices(c.bdms) {
		devs = append(devs, BlockDevice{DeviceName: d.DeviceName, VolumeSizeGiB: int32(d.Size / scheduling.GiB)})
	}
	ns := nodeSettings(ks.Registration, devs)
	return NodeSpec{Name: "n", Type: ct, Settings: &ns}.Node()
}

// Over the whole catalog and for node classes with kubelet settings, block devices and RAID0,
// the node registers the allocatable the scheduler plans its pool with.
func TestRegisteredCapacityUnderNodeClassSettings(t *testing.T) {
	types := catalog.Schedulable()
	planned := scheduling.FromCatalog(types, nil)
	for _, c := range nodeClasses {
		t.Run(c.name, func(t *testing.T) {
			var policy *string
			if c.raid0 {
				policy = ptr("RAID0")
			}
			ns := clusterstate.NodeClassSettings(c.kubelet, c.bdms, policy, c.family, scheduling.VMMemoryOverhead)
			require.NoError(t, ns.Validate())
			for i, ct := range types {
				capacity, alloc, err := planned[i].Resources(&ns)
				require.NoError(t, err)
				node := registered(t, c, ct)
				for name, want := range alloc {
					got := node.Status.Allocatable[corev1.ResourceName(name)]
					value := got.Value()
					if name == scheduling.ResourceCPU {
						value = got.MilliValue()
					}
					if !assert.Equal(t, want, value, "%s %s allocatable", ct.Name, name) {
						return
					}
				}
				require.Len(t, node.Status.Allocatable, len(capacity), ct.Name)
			}
		})
	}
	// The settings reached the node.
	m5d := mustType(t, "m5d.large")
	n := registered(t, nodeClasses[1], m5d)
	assert.Equal(t, int64(10), n.Status.Allocatable.Pods().Value(), "maxPods")
	assert.Equal(t, "100Gi", n.Status.Capacity.StorageEphemeral().String(), "the class's root volume")
	n = registered(t, nodeClasses[2], m5d)
	assert.Equal(t, "80Gi", n.Status.Capacity.StorageEphemeral().String(), "Bottlerocket's data volume")
	n = registered(t, nodeClasses[3], m5d)
	assert.Equal(t, *m5d.LocalNVMeGiB*scheduling.GiB, n.Status.Capacity.StorageEphemeral().Value(), "RAID0 instance stores")
	assert.Equal(t, int64(8), n.Status.Capacity.Pods().Value(), "4 pods per core")
	n = registered(t, nodeClasses[3], mustType(t, "m5.large"))
	assert.Equal(t, int64(94)*scheduling.GiB, n.Status.Capacity.StorageEphemeral().Value(), "100G is 94 whole GiB, rounded up")
}

func ptr[T any](v T) *T { return &v }

func mustType(t *testing.T, name string) catalog.InstanceType {
	it, ok := catalog.Lookup(name)
	require.True(t, ok, name)
	return it
}
