package e2e_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/tools/awsemu"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// everyField is an EC2NodeClass that sets every field Fleetwright honours, and a pool on it.
const everyField = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: everything
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: KarpenterNodeRole-demo-cluster
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: demo-cluster}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: demo-cluster}
  associatePublicIPAddress: true
  detailedMonitoring: true
  context: cr-0123456789abcdef0
  instanceStorePolicy: RAID0
  metadataOptions:
    httpEndpoint: enabled
    httpProtocolIPv6: disabled
    httpPutResponseHopLimit: 2
    httpTokens: required
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs:
        volumeSize: 80Gi
        volumeType: gp3
        iops: 4000
        throughput: 250
        encrypted: true
        deleteOnTermination: true
  kubelet:
    maxPods: 20
    systemReserved: {cpu: 100m, memory: 100Mi, ephemeral-storage: 1Gi}
    kubeReserved: {cpu: 200m, memory: 300Mi, ephemeral-storage: 2Gi}
    evictionHard: {memory.available: 5%, nodefs.available: 10%}
    evictionSoft: {memory.available: 500Mi}
    evictionSoftGracePeriod: {memory.available: 1m}
    evictionMaxPodGracePeriod: 60
    imageGCHighThresholdPercent: 85
    imageGCLowThresholdPercent: 80
    cpuCFSQuota: true
    clusterDNS: [10.100.0.10]
  tags:
    team: platform
    cost-center: "42"
  userData: |
    #!/bin/bash
    echo everything-class-setup
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: everything
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: everything}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m6gd.large]}
        - {key: kubernetes.io/arch, operator: In, values: [arm64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
`

// Issue 11: one EC2NodeClass using every field. Each reaches the instance or its launch
// template as the emulator recorded them, and the Node registers the capacity and allocatable
// the scheduler planned with (the one capacity function, under the class's kubelet settings,
// root volume and RAID0 over the type's NVMe).
func TestEveryNodeClassFieldReachesTheInstance(t *testing.T) {
	t.Parallel()
	s := e2e.NewStack(t, nil)
	ctx := context.Background()
	applyYAML(t, s, everyField)
	deployment(t, s, "everything", 1, "500m", "", "      nodeSelector: {karpenter.sh/nodepool: everything}\n")
	podsRunning(t, s, "app=everything", 1, 3*time.Minute)

	claims := s.NodeClaims(t)
	require.Len(t, claims, 1)
	claim := claims[0]
	insts, err := s.Emu.Instances(ctx)
	require.NoError(t, err)
	i := slices.IndexFunc(insts, func(in awsemu.InstanceInfo) bool { return "aws:///"+in.Zone+"/"+in.ID == claim.Status.ProviderID })
	require.GreaterOrEqual(t, i, 0, "the claim's instance")
	inst := insts[i]
	lts, err := s.Emu.LaunchTemplates(ctx)
	require.NoError(t, err)
	var lt *awsemu.LaunchTemplateInfo
	for _, tag := range inst.Tags {
		for j := range lts {
			if tag.Key == "aws:ec2launchtemplate:id" && lts[j].ID == tag.Value {
				lt = &lts[j]
			}
		}
	}
	require.NotNil(t, lt, "the instance's launch template is recorded")

	// role → an instance profile that exists and holds the role
	var class ec2v1.EC2NodeClass
	require.Eventually(t, func() bool {
		return s.Client.Get(ctx, client.ObjectKey{Name: "everything"}, &class) == nil && class.Status.InstanceProfile != "" && len(class.Status.AMIs) > 0
	}, 30*time.Second, 100*time.Millisecond, "the class status names its instance profile and images")
	assert.Equal(t, class.Status.InstanceProfile, lt.InstanceProfile)
	assert.Equal(t, class.Status.InstanceProfile, inst.InstanceProfile)
	profiles, err := s.Emu.InstanceProfiles(ctx)
	require.NoError(t, err)
	p := slices.IndexFunc(profiles, func(ip awsemu.InstanceProfileInfo) bool { return ip.Name == class.Status.InstanceProfile })
	require.GreaterOrEqual(t, p, 0, "the profile exists")
	assert.Equal(t, "KarpenterNodeRole-demo-cluster", profiles[p].Role)
	// blockDeviceMappings
	require.Len(t, lt.BlockDevices, 1)
	d := lt.BlockDevices[0]
	assert.Equal(t, "/dev/xvda", d.DeviceName)
	assert.Equal(t, 80, int(d.VolumeSizeGiB))
	assert.Equal(t, "gp3", d.VolumeType)
	assert.Equal(t, 4000, int(d.IOPS))
	assert.Equal(t, 250, int(d.Throughput))
	assert.True(t, d.Encrypted != nil && *d.Encrypted, "encrypted")
	// metadataOptions, associatePublicIPAddress, detailedMonitoring, context
	assert.Equal(t, 2, lt.MetadataOptions.HTTPPutResponseHopLimit)
	assert.Equal(t, "required", lt.MetadataOptions.HTTPTokens)
	assert.Equal(t, "enabled", lt.MetadataOptions.HTTPEndpoint)
	require.NotEmpty(t, lt.NetworkInterfaces)
	assert.True(t, lt.NetworkInterfaces[0].AssociatePublicIPAddress != nil && *lt.NetworkInterfaces[0].AssociatePublicIPAddress, "public IP")
	assert.True(t, lt.Monitoring, "detailed monitoring")
	assert.Equal(t, "cr-0123456789abcdef0", inst.Context)
	// tags, on the instance
	tags := map[string]string{}
	for _, tag := range inst.Tags {
		tags[tag.Key] = tag.Value
	}
	assert.Equal(t, "platform", tags["team"])
	assert.Equal(t, "42", tags["cost-center"])
	// kubelet, instanceStorePolicy and userData, in the user data
	for _, want := range []string{"maxPods: 20", "memory.available: 5%", "imageGCHighThresholdPercent: 85", "10.100.0.10",
		"strategy: RAID0", "echo everything-class-setup"} {
		assert.Contains(t, lt.UserData, want)
	}
	// alias → the al2023 image the class status names
	require.NotEmpty(t, class.Status.AMIs)
	assert.True(t, slices.ContainsFunc(class.Status.AMIs, func(a ec2v1.AMI) bool { return a.ID == inst.ImageID }), "launched from a resolved image")

	// The Node's capacity and allocatable are what the scheduler planned.
	node := getNode(t, s, claim.Status.NodeName)
	require.NotNil(t, node)
	it, ok := catalog.Lookup("m6gd.large")
	require.True(t, ok)
	settings := clusterstate.NodeClassSettings(class.Spec.Kubelet, class.Spec.BlockDeviceMappings, class.Spec.InstanceStorePolicy,
		class.ResolvedAMIFamily(), scheduling.VMMemoryOverhead)
	capacity, allocatable, err := scheduling.NodeResources(it, settings)
	require.NoError(t, err)
	for name, want := range podproj.KubeResources(capacity) {
		got := node.Status.Capacity[name]
		assert.True(t, want.Equal(got), "capacity %s: planned %s, registered %s", name, want.String(), got.String())
	}
	for name, want := range podproj.KubeResources(allocatable) {
		got := node.Status.Allocatable[name]
		assert.True(t, want.Equal(got), "allocatable %s: planned %s, registered %s", name, want.String(), got.String())
	}
	pods := node.Status.Allocatable[corev1.ResourcePods]
	assert.Equal(t, int64(20), pods.Value(), "maxPods")
	assert.Equal(t, "everything", node.Labels[karpv1.NodePoolLabelKey])
}
