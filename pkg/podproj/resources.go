package podproj

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// CoreResources converts Kubernetes quantities into the scheduling core's units (cpu in
// millicores, the rest in whole units).
func CoreResources(rl corev1.ResourceList) scheduling.ResourceList {
	out := make(scheduling.ResourceList, len(rl))
	for n, q := range rl {
		if n == corev1.ResourceCPU {
			out[string(n)] = q.MilliValue()
		} else {
			out[string(n)] = q.Value()
		}
	}
	return out
}

// KubeResources converts the core's units back into Kubernetes quantities.
func KubeResources(rl scheduling.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(rl))
	for n, q := range rl {
		switch n {
		case scheduling.ResourceCPU:
			out[corev1.ResourceName(n)] = *resource.NewMilliQuantity(q, resource.DecimalSI)
		case scheduling.ResourceMemory, scheduling.ResourceEphemeralStorage:
			out[corev1.ResourceName(n)] = *resource.NewQuantity(q, resource.BinarySI)
		default:
			out[corev1.ResourceName(n)] = *resource.NewQuantity(q, resource.DecimalSI)
		}
	}
	return out
}
