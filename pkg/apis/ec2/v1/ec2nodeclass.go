package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass says how instances for a NodePool are launched in EC2.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ec2nodeclasses,scope=Cluster,categories=karpenter,shortName={ec2nc,ec2ncs}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Role",type="string",JSONPath=".spec.role",priority=1
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   EC2NodeClassSpec   `json:"spec"`
	Status EC2NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClasses.
//
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}

// EC2NodeClassSpec is how to launch an instance.
// +kubebuilder:validation:XValidation:message="must specify exactly one of ['role', 'instanceProfile']",rule="(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))"
// +kubebuilder:validation:XValidation:message="must specify amiFamily if amiSelectorTerms does not contain an alias",rule="self.amiSelectorTerms.exists(x, has(x.alias)) || has(self.amiFamily)"
// +kubebuilder:validation:XValidation:message="kubelet.podsPerCore is not supported by the Bottlerocket AMI family (its settings have no pods-per-core); use maxPods",rule="!(has(self.kubelet) && has(self.kubelet.podsPerCore)) || !((has(self.amiFamily) && self.amiFamily == 'Bottlerocket') || self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.startsWith('bottlerocket@')))"
type EC2NodeClassSpec struct {
	// SubnetSelectorTerms find the subnets instances may be launched in; a subnet matching any
	// term is used.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id']",rule="self.all(x, has(x.tags) || has(x.id))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in subnetSelectorTerms",rule="!self.exists(x, has(x.id) && has(x.tags))"
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +required
	SubnetSelectorTerms []SubnetSelectorTerm `json:"subnetSelectorTerms"`
	// SecurityGroupSelectorTerms find the security groups instances get.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in securityGroupSelectorTerms",rule="!self.exists(x, has(x.id) && (has(x.tags) || has(x.name)))"
	// +kubebuilder:validation:XValidation:message="'name' is mutually exclusive, cannot be set with a combination of other fields in securityGroupSelectorTerms",rule="!self.exists(x, has(x.name) && (has(x.tags) || has(x.id)))"
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +required
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`
	// AssociatePublicIPAddress overrides the subnet's public IP setting.
	// +optional
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`
	// AMISelectorTerms find the AMIs instances are launched from: an alias of a family's
	// published AMIs (al2023@latest), an SSM parameter holding an AMI id, or AMIs by id, name,
	// owner and tags.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner) || has(x.ssmParameter)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner) || has(x.ssmParameter)))"
	// +kubebuilder:validation:XValidation:message="'ssmParameter' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.ssmParameter) && (has(x.id) || has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",rule="!(self.exists(x, has(x.alias)) && self.size() != 1)"
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +required
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms"`
	// AMIFamily says how user data is written for the AMIs; taken from the alias when unset.
	// +kubebuilder:validation:Enum=AL2;AL2023;Bottlerocket;Custom;Windows2019;Windows2022
	// +kubebuilder:validation:XValidation:message="Fleetwright does not launch Windows nodes: amiFamily Windows2019 and Windows2022 are not supported",rule="!(self in ['Windows2019', 'Windows2022'])"
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty"`
	// UserData is merged with (or, for Custom, replaces) the user data Fleetwright writes.
	// +optional
	UserData *string `json:"userData,omitempty"`
	// Role is the IAM role the instances assume; an instance profile is made for it.
	// +optional
	Role string `json:"role,omitempty"`
	// InstanceProfile is an existing instance profile to launch with, instead of Role.
	// +optional
	InstanceProfile *string `json:"instanceProfile,omitempty"`
	// Tags are put on instances, volumes and launch templates.
	// +kubebuilder:validation:XValidation:message="empty tag keys aren't supported",rule="self.all(k, k != '')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching eks:eks-cluster-name",rule="self.all(k, k != 'eks:eks-cluster-name')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching kubernetes.io/cluster/",rule="self.all(k, !k.startsWith('kubernetes.io/cluster'))"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodepool",rule="self.all(k, k != 'karpenter.sh/nodepool')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodeclaim",rule="self.all(k, k != 'karpenter.sh/nodeclaim')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",rule="self.all(k, k != 'karpenter.k8s.aws/ec2nodeclass')"
	// +kubebuilder:validation:MaxProperties=50
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// Kubelet settings for the nodes.
	// +optional
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`
	// BlockDeviceMappings are the instances' volumes; the AMI family's default when empty.
	// +kubebuilder:validation:XValidation:message="must have only one blockDeviceMappings with rootVolume",rule="self.filter(x, has(x.rootVolume) ? x.rootVolume : false).size() <= 1"
	// +kubebuilder:validation:MaxItems=50
	// +optional
	BlockDeviceMappings []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	// InstanceStorePolicy says what to do with local NVMe instance stores: RAID0 them for
	// ephemeral storage.
	// +kubebuilder:validation:Enum=RAID0
	// +optional
	InstanceStorePolicy *string `json:"instanceStorePolicy,omitempty"`
	// DetailedMonitoring turns on one-minute CloudWatch metrics.
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`
	// MetadataOptions configure the instance metadata service; IMDSv2 with a hop limit of 1 by
	// default.
	// +kubebuilder:default={"httpEndpoint":"enabled","httpProtocolIPv6":"disabled","httpPutResponseHopLimit":1,"httpTokens":"required"}
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`
	// Context is the EC2 launch context (for Outposts and reservations).
	// +optional
	Context *string `json:"context,omitempty"`
}

// SubnetSelectorTerm selects subnets by id, or by tags (all must match; "*" matches any value).
type SubnetSelectorTerm struct {
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// +kubebuilder:validation:Pattern="subnet-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by id, by name, or by tags.
type SecurityGroupSelectorTerm struct {
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// +kubebuilder:validation:Pattern:="sg-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
	// Name is the group's name (not its Name tag).
	// +optional
	Name string `json:"name,omitempty"`
}

// AMISelectorTerm selects AMIs: by alias (family@version), by id, by the SSM parameter holding
// an id, or by name, owner and tags.
type AMISelectorTerm struct {
	// Alias is family@version, e.g. al2023@latest or bottlerocket@v1.20.0.
	// +kubebuilder:validation:XValidation:message="'alias' is improperly formatted, must match the format 'family@version'",rule="self.matches('^[a-zA-Z0-9]+@.+$')"
	// +kubebuilder:validation:XValidation:message="family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022'",rule="self.find('^[^@]+') in ['al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022']"
	// +kubebuilder:validation:XValidation:message="windows families may only specify version 'latest'",rule="self.find('^[^@]+') in ['windows2019', 'windows2022'] ? self.find('[^@]+$') == 'latest' : true"
	// +kubebuilder:validation:XValidation:message="Fleetwright does not launch Windows nodes: windows2019 and windows2022 aliases are not supported",rule="!(self.find('^[^@]+') in ['windows2019', 'windows2022'])"
	// +kubebuilder:validation:MaxLength=30
	// +optional
	Alias string `json:"alias,omitempty"`
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// +kubebuilder:validation:Pattern="ami-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
	// Name is the AMI name; wildcards allowed.
	// +optional
	Name string `json:"name,omitempty"`
	// Owner is an account id or alias (self, amazon); with Name or Tags.
	// +optional
	Owner string `json:"owner,omitempty"`
	// SSMParameter is the name (or ARN) of an SSM parameter whose value is the AMI id.
	// +optional
	SSMParameter string `json:"ssmParameter,omitempty"`
}

// AliasFamily is the family part of an alias term ("al2023" of "al2023@latest").
func (t AMISelectorTerm) AliasFamily() string {
	for i := range len(t.Alias) {
		if t.Alias[i] == '@' {
			return t.Alias[:i]
		}
	}
	return t.Alias
}

// AliasVersion is the version part of an alias term ("latest" of "al2023@latest").
func (t AMISelectorTerm) AliasVersion() string {
	for i := range len(t.Alias) {
		if t.Alias[i] == '@' {
			return t.Alias[i+1:]
		}
	}
	return ""
}

// MetadataOptions configure the instance metadata service.
type MetadataOptions struct {
	// +kubebuilder:default=enabled
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`
	// +kubebuilder:default=disabled
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=64
	// +optional
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`
	// +kubebuilder:default=required
	// +kubebuilder:validation:Enum:={required,optional}
	// +optional
	HTTPTokens *string `json:"httpTokens,omitempty"`
}

// EC2NodeClassStatus is what the launcher resolved the selector terms to.
type EC2NodeClassStatus struct {
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`
	// +optional
	AMIs []AMI `json:"amis,omitempty"`
	// InstanceProfile is the profile instances are launched with (made for Role, or given).
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// Conditions: SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady,
	// ValidationSucceeded, Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is a resolved subnet.
type Subnet struct {
	// +required
	ID string `json:"id"`
	// +required
	Zone string `json:"zone"`
	// +optional
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	// +required
	ID string `json:"id"`
	// +optional
	Name string `json:"name,omitempty"`
}

// AMI is a resolved AMI and the instance requirements it serves (architecture, GPU, ...).
type AMI struct {
	// +required
	ID string `json:"id"`
	// +optional
	Name string `json:"name,omitempty"`
	// Deprecated AMIs are used only when no other matches.
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
	// +required
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}

// EC2NodeClass condition types.
const (
	ConditionTypeSubnetsReady         = "SubnetsReady"
	ConditionTypeSecurityGroupsReady  = "SecurityGroupsReady"
	ConditionTypeAMIsReady            = "AMIsReady"
	ConditionTypeInstanceProfileReady = "InstanceProfileReady"
	ConditionTypeValidationSucceeded  = "ValidationSucceeded"
	ConditionTypeReady                = "Ready"
)

// SetCondition sets a condition, stamping the generation it saw.
func (in *EC2NodeClass) SetCondition(c metav1.Condition) bool {
	c.ObservedGeneration = in.Generation
	return meta.SetStatusCondition(&in.Status.Conditions, c)
}

// IsTrue reports whether the condition of the type is True.
func (in *EC2NodeClass) IsTrue(conditionType string) bool {
	return meta.IsStatusConditionTrue(in.Status.Conditions, conditionType)
}

// ResolvedAMIFamily is the AMI family user data is written for: AMIFamily if set, else the
// alias's family (al2023@latest gives AL2023).
func (in *EC2NodeClass) ResolvedAMIFamily() string {
	if in.Spec.AMIFamily != nil {
		return *in.Spec.AMIFamily
	}
	for _, t := range in.Spec.AMISelectorTerms {
		if t.Alias != "" {
			return familyOfAlias[t.AliasFamily()]
		}
	}
	return ""
}

var familyOfAlias = map[string]string{
	"al2":          AMIFamilyAL2,
	"al2023":       AMIFamilyAL2023,
	"bottlerocket": AMIFamilyBottlerocket,
	"windows2019":  AMIFamilyWindows2019,
	"windows2022":  AMIFamilyWindows2022,
}

// AliasOf is the alias term (family@version) for an AMI family, e.g. al2023@latest; "" for
// Custom or an unknown family.
func AliasOf(family, version string) string {
	for alias, f := range familyOfAlias {
		if f == family {
			return alias + "@" + version
		}
	}
	return ""
}
