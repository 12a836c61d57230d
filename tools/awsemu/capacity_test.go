package awsemu

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
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

func mustType(t *testing.T, name string) catalog.InstanceType {
	it, ok := catalog.Lookup(name)
	require.True(t, ok, name)
	return it
}
