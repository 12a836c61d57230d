package awsemu

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

const al2UserData = `#!/bin/bash -xe
exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1
/etc/eks/bootstrap.sh 'demo-cluster' --apiserver-endpoint 'https://example' --b64-cluster-ca 'Y2E=' \
--use-max-pods false \
--kubelet-extra-args '--node-labels=a=b,karpenter.sh/nodepool=default --register-with-taints=t=v:NoSchedule,only-key:NoExecute --max-pods=110'
`

const al2023UserData = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: demo-cluster
  kubelet:
    config:
      maxPods: 110
      registerWithTaints:
      - key: karpenter.sh/unregistered
        effect: NoExecute
    flags:
    - --node-labels="a=b,karpenter.sh/capacity-type=spot"
    - --register-with-taints=t=v:NoSchedule

--//--
`

const bottlerocketUserData = `[settings.kubernetes]
cluster-name = "demo-cluster"
[settings.kubernetes.node-labels]
"a" = "b"
[settings.kubernetes.node-taints]
"t" = ["v:NoSchedule"]
`

func TestParseKubeletSettings(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		labels map[string]string
		taints []corev1.Taint
	}{
		{"AL2 bootstrap.sh", al2UserData,
			map[string]string{"a": "b", "karpenter.sh/nodepool": "default"},
			[]corev1.Taint{{Key: "t", Value: "v", Effect: corev1.TaintEffectNoSchedule}, {Key: "only-key", Effect: corev1.TaintEffectNoExecute}}},
		{"AL2023 nodeadm in MIME", al2023UserData,
			map[string]string{"a": "b", "karpenter.sh/capacity-type": "spot"},
			[]corev1.Taint{{Key: "t", Value: "v", Effect: corev1.TaintEffectNoSchedule}, {Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}}},
		{"Bottlerocket TOML", bottlerocketUserData,
			map[string]string{"a": "b"},
			[]corev1.Taint{{Key: "t", Value: "v", Effect: corev1.TaintEffectNoSchedule}}},
		{"nothing asked", "#!/bin/bash\necho hi\n", map[string]string{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseKubeletSettings(tc.data)
			require.NoError(t, err)
			assert.Equal(t, tc.labels, got.Labels)
			assert.ElementsMatch(t, tc.taints, got.Taints)
		})
	}
}

func TestParseKubeletSettingsRejectsBadTaint(t *testing.T) {
	_, err := parseKubeletSettings("/etc/eks/bootstrap.sh demo --kubelet-extra-args '--register-with-taints=t=v:Sometimes'")
	require.ErrorContains(t, err, "unknown effect")
}

func TestNodeFromCatalog(t *testing.T) {
	emu, err := New(Config{Clock: NewManualClock(epoch)})
	require.NoError(t, err)
	typ, ok := emu.world.instanceType("m5.large")
	require.True(t, ok)
	spec := NodeSpec{Name: "ip-10-0-0-4.ec2.internal", InstanceID: "i-0123456789abcdef0", Type: typ, Zone: "us-east-1a",
		ZoneID: "use1-az1", Region: "us-east-1", PrivateIP: "10.0.0.4", Labels: map[string]string{"a": "b"},
		Taints: []corev1.Taint{{Key: "t", Value: "v", Effect: corev1.TaintEffectNoSchedule}}}
	n := spec.Node()
	assert.Equal(t, "aws:///us-east-1a/i-0123456789abcdef0", n.Spec.ProviderID)
	assert.Equal(t, "fake", n.Annotations["kwok.x-k8s.io/node"])
	for k, v := range map[string]string{"a": "b", "node.kubernetes.io/instance-type": "m5.large", "kubernetes.io/arch": "amd64",
		"topology.kubernetes.io/zone": "us-east-1a", "topology.kubernetes.io/region": "us-east-1",
		"kubernetes.io/hostname": "ip-10-0-0-4.ec2.internal", "kubernetes.io/os": "linux"} {
		assert.Equal(t, v, n.Labels[k], k)
	}
	// m5.large: 2 vCPU, 8 GiB, 29 pods. CPU reserved 60m+10m; memory 8192×0.925 = 7577Mi,
	// minus 11×29+255 = 574Mi kube-reserved and 100Mi eviction = 6903Mi.
	assert.Equal(t, "2", n.Status.Capacity.Cpu().String())
	assert.Equal(t, "1930m", n.Status.Allocatable.Cpu().String())
	assert.Equal(t, "7577Mi", n.Status.Capacity.Memory().String())
	assert.Equal(t, "6903Mi", n.Status.Allocatable.Memory().String())
	assert.Equal(t, int64(typ.MaxPods), n.Status.Allocatable.Pods().Value())
	assert.Equal(t, 29, typ.MaxPods)
}

// The launch template's block device mappings are recorded as sent, invalid ones refused, and
// an instance launched from it registers its node with the volume's size and the user data's
// kubelet settings.
func TestTemplateBlockDevicesAndKubeletSettingsReachTheNode(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-*")
	ud := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: demo-cluster\n  kubelet:\n    config:\n      maxPods: 12\n      kubeReserved:\n        memory: 1Gi\n"
	_, err := e.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("with-volumes"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(img), UserData: aws.String(b64(ud)),
			BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String("/dev/xvda"),
				Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(120), VolumeType: ec2types.VolumeTypeGp3,
					Iops: aws.Int32(4000), Throughput: aws.Int32(250), Encrypted: aws.Bool(true), KmsKeyId: aws.String("arn:aws:kms:us-east-1:111122223333:key/k"),
					DeleteOnTermination: aws.Bool(true), SnapshotId: aws.String("snap-0123")}}}},
	})
	require.NoError(t, err)
	tmpls := e.emu.LaunchTemplates()
	require.Len(t, tmpls, 1)
	assert.Equal(t, []BlockDevice{{DeviceName: "/dev/xvda", VolumeSizeGiB: 120, VolumeType: "gp3", IOPS: 4000, Throughput: 250,
		Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true), KMSKeyID: "arn:aws:kms:us-east-1:111122223333:key/k", SnapshotID: "snap-0123"}},
		tmpls[0].BlockDevices)
	assert.Equal(t, ud, tmpls[0].UserData)

	ids := e.launch(t, e.fleet(t, "with-volumes", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"}))
	e.emu.mu.Lock()
	inst := e.emu.instances[ids[0]]
	e.emu.mu.Unlock()
	n := e.emu.nodeSpec(inst).Node()
	assert.Equal(t, "120Gi", n.Status.Capacity.StorageEphemeral().String())
	assert.Equal(t, int64(12), n.Status.Capacity.Pods().Value())
	// 7577Mi less 1Gi kube-reserved and 100Mi eviction.
	assert.Equal(t, "6453Mi", n.Status.Allocatable.Memory().String())

	for _, bad := range []ec2types.LaunchTemplateBlockDeviceMappingRequest{
		{Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(10)}},
		{DeviceName: aws.String("/dev/xvda"), Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeType: "gp9"}},
		{DeviceName: aws.String("/dev/xvda"), Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(0)}},
	} {
		_, err := e.ec2Once.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("bad"),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{bad}}})
		assert.Error(t, err)
	}
}
