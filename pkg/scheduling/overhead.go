package scheduling

// EKS node overhead, as the EKS-optimised AMI's bootstrap computes kube-reserved and as
// Karpenter models it.

// kubeReservedCPU is the kube-reserved CPU (millicores) for a node with cpu millicores:
// 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% of the rest.
func kubeReservedCPU(cpu int64) int64 {
	bands := []struct {
		upTo int64 // millicores
		frac float64
	}{{1000, 0.06}, {2000, 0.01}, {4000, 0.005}, {1 << 62, 0.0025}}
	var reserved float64
	var from int64
	for _, b := range bands {
		if cpu <= from {
			break
		}
		reserved += float64(min(cpu, b.upTo)-from) * b.frac
		from = b.upTo
	}
	return int64(reserved)
}

// kubeReservedMemory is 255Mi plus 11Mi for each pod the node may run.
func kubeReservedMemory(maxPods int64) int64 { return 255*MiB + 11*MiB*maxPods }

// VMMemoryOverhead is the share of an instance's nominal memory the hypervisor and kernel keep,
// which the node never reports (Karpenter's VM_MEMORY_OVERHEAD_PERCENT default).
const VMMemoryOverhead = 0.075

// Eviction thresholds: 100Mi of memory, 10% of ephemeral storage; kube-reserved storage 1Gi.
const (
	evictionMemory        = 100 * MiB
	evictionEphemeralPct  = 10
	kubeReservedEphemeral = 1 * GiB
)

// nodeOverhead is what a node of the given capacity and no kubelet settings keeps for itself.
func nodeOverhead(capacity ResourceList) ResourceList {
	c, _ := DefaultNodeSettings().compile()
	return c.overhead(capacity)
}
