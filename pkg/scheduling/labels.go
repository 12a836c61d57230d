package scheduling

import "strings"

// Well-known label keys, as Karpenter and Kubernetes name them.
const (
	LabelNodePool        = "karpenter.sh/nodepool"
	LabelProvisionerName = "karpenter.sh/provisioner-name"
	LabelCapacityType    = "karpenter.sh/capacity-type"
	LabelInstanceType    = "node.kubernetes.io/instance-type"
	LabelZone            = "topology.kubernetes.io/zone"
	LabelZoneID          = "topology.k8s.aws/zone-id" // an offering label: Input.ZoneIDs maps zones to it
	LabelRegion          = "topology.kubernetes.io/region"
	LabelHostname        = "kubernetes.io/hostname"
	LabelArch            = "kubernetes.io/arch"
	LabelOS              = "kubernetes.io/os"

	LabelInstanceCategory        = "karpenter.k8s.aws/instance-category"
	LabelInstanceFamily          = "karpenter.k8s.aws/instance-family"
	LabelInstanceGeneration      = "karpenter.k8s.aws/instance-generation"
	LabelInstanceSize            = "karpenter.k8s.aws/instance-size"
	LabelInstanceCPU             = "karpenter.k8s.aws/instance-cpu"
	LabelInstanceCPUManufacturer = "karpenter.k8s.aws/instance-cpu-manufacturer"
	LabelInstanceMemory          = "karpenter.k8s.aws/instance-memory"
	LabelInstanceHypervisor      = "karpenter.k8s.aws/instance-hypervisor"
	LabelInstanceGPUName         = "karpenter.k8s.aws/instance-gpu-name"
	LabelInstanceGPUCount        = "karpenter.k8s.aws/instance-gpu-count"
	LabelInstanceGPUManufacturer = "karpenter.k8s.aws/instance-gpu-manufacturer"
	LabelInstanceGPUMemory       = "karpenter.k8s.aws/instance-gpu-memory"
	LabelInstanceAccelName       = "karpenter.k8s.aws/instance-accelerator-name"
	LabelInstanceAccelCount      = "karpenter.k8s.aws/instance-accelerator-count"
	LabelInstanceAccelMfr        = "karpenter.k8s.aws/instance-accelerator-manufacturer"
	LabelInstanceLocalNVMe       = "karpenter.k8s.aws/instance-local-nvme"
	LabelInstanceNetworkBW       = "karpenter.k8s.aws/instance-network-bandwidth"
	LabelInstanceEBSBW           = "karpenter.k8s.aws/instance-ebs-bandwidth"
	LabelInstanceCPUClock        = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceEncryptTransit  = "karpenter.k8s.aws/instance-encryption-in-transit-supported"
	LabelInstanceCapabilityFlex  = "karpenter.k8s.aws/instance-capability-flex"
)

// normalizedLabels are the keys read as another, as Karpenter reads them (its NormalizedLabels,
// and the AWS provider's EBS CSI zone): deprecated ones Kubernetes nodes still carry.
var normalizedLabels = map[string]string{
	"failure-domain.beta.kubernetes.io/zone":   LabelZone,
	"failure-domain.beta.kubernetes.io/region": LabelRegion,
	"beta.kubernetes.io/arch":                  LabelArch,
	"beta.kubernetes.io/os":                    LabelOS,
	"beta.kubernetes.io/instance-type":         LabelInstanceType,
	"topology.ebs.csi.aws.com/zone":            LabelZone,
}

// Capacity types.
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
)

// isTypeLabel reports whether the instance type (not the offering) decides the label's value.
func isTypeLabel(key string) bool {
	switch key {
	case LabelInstanceType, LabelArch, LabelOS:
		return true
	}
	return strings.HasPrefix(key, "karpenter.k8s.aws/instance-")
}

// isWellKnown reports whether a new node gets the label from its instance type, offering or
// region, so a pod may require it although the pool does not mention it.
func isWellKnown(key string) bool {
	switch key {
	case LabelZone, LabelZoneID, LabelCapacityType, LabelRegion:
		return true
	}
	return isTypeLabel(key)
}
