package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Selector keys with a meaning of their own; any other key is a tag.
const (
	// SelectorIDs ("aws-ids") lists subnet or security group ids, comma separated.
	SelectorIDs = "aws-ids"
	// AMISelectorIDs ("aws::ids") lists AMI ids, comma separated.
	AMISelectorIDs = "aws::ids"
	// AMISelectorName ("aws::name") is an AMI name (wildcards allowed).
	AMISelectorName = "aws::name"
	// AMISelectorOwners ("aws::owners") lists AMI owners, comma separated.
	AMISelectorOwners = "aws::owners"
)

// AWSNodeTemplate is the v1alpha1 form of an EC2NodeClass.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=awsnodetemplates,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type AWSNodeTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AWSNodeTemplateSpec   `json:"spec,omitempty"`
	Status AWSNodeTemplateStatus `json:"status,omitempty"`
}

// AWSNodeTemplateList is a list of AWSNodeTemplates.
//
// +kubebuilder:object:root=true
type AWSNodeTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AWSNodeTemplate `json:"items"`
}

// AWSNodeTemplateSpec is how to launch an instance. Its AWS fields are also what a
// Provisioner's inline provider holds.
// +kubebuilder:validation:XValidation:message="launchTemplate is not supported: Fleetwright, like Karpenter v1, launches from launch templates it makes itself; put the template's settings (metadataOptions, blockDeviceMappings, userData, ...) in the AWSNodeTemplate",rule="!has(self.launchTemplate)"
type AWSNodeTemplateSpec struct {
	// UserData is merged with the user data Fleetwright writes.
	// +optional
	UserData *string `json:"userData,omitempty"`
	// AMISelector finds AMIs: aws::ids, aws::name, aws::owners, or tags.
	// +optional
	AMISelector map[string]string `json:"amiSelector,omitempty"`
	// DetailedMonitoring turns on one-minute CloudWatch metrics.
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`
	AWS                `json:",inline"`
}

// AWS is the launch settings shared with the inline provider.
type AWS struct {
	// AMIFamily says how user data is written; AL2 when unset.
	// +kubebuilder:validation:Enum=AL2;AL2023;Bottlerocket;Ubuntu;Custom;Windows2019;Windows2022
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty"`
	// Context is the EC2 launch context.
	// +optional
	Context *string `json:"context,omitempty"`
	// InstanceProfile instances are launched with; the cluster's default when unset.
	// +optional
	InstanceProfile *string `json:"instanceProfile,omitempty"`
	// SubnetSelector finds subnets: aws-ids, or tags ("*" matches any value).
	// +optional
	SubnetSelector map[string]string `json:"subnetSelector,omitempty"`
	// SecurityGroupSelector finds security groups: aws-ids, or tags.
	// +optional
	SecurityGroupSelector map[string]string `json:"securityGroupSelector,omitempty"`
	// Tags are put on instances, volumes and launch templates.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// LaunchTemplate settings.
	LaunchTemplate `json:",inline"`
}

// LaunchTemplate is the launch template part of the AWS settings.
type LaunchTemplate struct {
	// LaunchTemplateName is a launch template of the user's own; not supported by v1.
	// +optional
	LaunchTemplateName *string `json:"launchTemplate,omitempty"`
	// MetadataOptions configure the instance metadata service.
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`
	// BlockDeviceMappings are the instances' volumes.
	// +optional
	BlockDeviceMappings []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
}

// MetadataOptions configure the instance metadata service.
type MetadataOptions struct {
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=64
	// +optional
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`
	// +kubebuilder:validation:Enum:={required,optional}
	// +optional
	HTTPTokens *string `json:"httpTokens,omitempty"`
}

// BlockDeviceMapping is one volume of the instance.
type BlockDeviceMapping struct {
	// +optional
	DeviceName *string `json:"deviceName,omitempty"`
	// +optional
	EBS *BlockDevice `json:"ebs,omitempty"`
}

// BlockDevice is an EBS volume.
type BlockDevice struct {
	// +optional
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
	// +optional
	IOPS *int64 `json:"iops,omitempty"`
	// +optional
	KMSKeyID *string `json:"kmsKeyID,omitempty"`
	// +optional
	SnapshotID *string `json:"snapshotID,omitempty"`
	// +optional
	Throughput *int64 `json:"throughput,omitempty"`
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`
	// +kubebuilder:validation:Enum:={standard,io1,io2,gp2,sc1,st1,gp3}
	// +optional
	VolumeType *string `json:"volumeType,omitempty"`
}

// AWSNodeTemplateStatus is what the selectors resolved to.
type AWSNodeTemplateStatus struct {
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`
	// +optional
	AMIs []AMI `json:"amis,omitempty"`
}

// Subnet is a resolved subnet.
type Subnet struct {
	ID   string `json:"id"`
	Zone string `json:"zone"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	ID string `json:"id"`
	// +optional
	Name string `json:"name,omitempty"`
}

// AMI is a resolved AMI.
type AMI struct {
	ID string `json:"id"`
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Requirements []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
}
