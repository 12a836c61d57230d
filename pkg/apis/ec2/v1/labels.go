package v1

// Labels that describe an instance type; NodePool requirements select on them and launched
// Nodes carry them.
const (
	LabelInstanceCategory                = Group + "/instance-category"
	LabelInstanceFamily                  = Group + "/instance-family"
	LabelInstanceGeneration              = Group + "/instance-generation"
	LabelInstanceSize                    = Group + "/instance-size"
	LabelInstanceCPU                     = Group + "/instance-cpu"
	LabelInstanceCPUManufacturer         = Group + "/instance-cpu-manufacturer"
	LabelInstanceCPUSustainedClockSpeed  = Group + "/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceMemory                  = Group + "/instance-memory"
	LabelInstanceEBSBandwidth            = Group + "/instance-ebs-bandwidth"
	LabelInstanceNetworkBandwidth        = Group + "/instance-network-bandwidth"
	LabelInstanceHypervisor              = Group + "/instance-hypervisor"
	LabelInstanceEncryptionInTransit     = Group + "/instance-encryption-in-transit-supported"
	LabelInstanceLocalNVME               = Group + "/instance-local-nvme"
	LabelInstanceGPUName                 = Group + "/instance-gpu-name"
	LabelInstanceGPUManufacturer         = Group + "/instance-gpu-manufacturer"
	LabelInstanceGPUCount                = Group + "/instance-gpu-count"
	LabelInstanceGPUMemory               = Group + "/instance-gpu-memory"
	LabelInstanceAcceleratorName         = Group + "/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer = Group + "/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount        = Group + "/instance-accelerator-count"
	LabelTopologyZoneID                  = "topology.k8s.aws/zone-id"
	LabelNodeClass                       = Group + "/ec2nodeclass"
	AnnotationEC2NodeClassHash           = Group + "/ec2nodeclass-hash"
	AnnotationEC2NodeClassHashVersion    = Group + "/ec2nodeclass-hash-version"
	AnnotationInstanceTagged             = Group + "/tagged"
	TerminationFinalizer                 = Group + "/termination"
)

// WellKnownLabels are the instance-type labels above that requirements may use.
var WellKnownLabels = []string{
	LabelInstanceCategory, LabelInstanceFamily, LabelInstanceGeneration, LabelInstanceSize,
	LabelInstanceCPU, LabelInstanceCPUManufacturer, LabelInstanceCPUSustainedClockSpeed,
	LabelInstanceMemory, LabelInstanceEBSBandwidth, LabelInstanceNetworkBandwidth,
	LabelInstanceHypervisor, LabelInstanceEncryptionInTransit, LabelInstanceLocalNVME,
	LabelInstanceGPUName, LabelInstanceGPUManufacturer, LabelInstanceGPUCount, LabelInstanceGPUMemory,
	LabelInstanceAcceleratorName, LabelInstanceAcceleratorManufacturer, LabelInstanceAcceleratorCount,
	LabelTopologyZoneID, LabelNodeClass,
}

// Tags put on every instance, launch template and volume launched for a NodeClaim.
const (
	TagNodePool       = "karpenter.sh/nodepool"
	TagNodeClaim      = "karpenter.sh/nodeclaim"
	TagNodeClass      = LabelNodeClass
	TagEKSClusterName = "eks:eks-cluster-name"
	// TagClusterPrefix + <cluster name> = "owned" marks what the cluster launched.
	TagClusterPrefix = "kubernetes.io/cluster/"
)

// AMI families, the values of EC2NodeClassSpec.AMIFamily.
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyCustom       = "Custom"
)
