package main

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/userdata"
)

// What a node class decides about its nodes beyond where they run: the kubelet settings the
// user data passes on, the volumes on the launch template, the instance-store policy, and so
// the capacity the node registers (scheduling.NodeResources, as the scheduler planned it).

// classKubelet converts an EC2NodeClass's (or a Provisioner's) kubelet settings for the user
// data, through their wire form (one conversion for both).
func classKubelet(k *ec2v1.KubeletConfiguration) userdata.Kubelet {
	if k == nil {
		return userdata.Kubelet{}
	}
	w := clusterstate.KubeletConfig(k)
	return userdata.Kubelet{
		MaxPods: w.MaxPods, PodsPerCore: w.PodsPerCore,
		SystemReserved: w.GetSystemReserved(), KubeReserved: w.GetKubeReserved(),
		EvictionHard: w.GetEvictionHard(), EvictionSoft: w.GetEvictionSoft(), EvictionSoftGracePeriod: w.GetEvictionSoftGracePeriod(),
		EvictionMaxPodGracePeriod:   w.EvictionMaxPodGracePeriod,
		ImageGCHighThresholdPercent: w.ImageGcHighThresholdPercent, ImageGCLowThresholdPercent: w.ImageGcLowThresholdPercent,
		CPUCFSQuota: w.CpuCfsQuota, ClusterDNS: w.GetClusterDns(),
	}
}

// kubeletFor is the kubelet settings a launch renders: a v1alpha5 Provisioner's own, which live
// on it, else the node class's (a NodePool's, as the scheduler planned with them).
func kubeletFor(pool clusterstate.Pool, class nodeClassSpec) userdata.Kubelet {
	if pool.NodePool != nil && pool.Legacy && pool.Kubelet != nil {
		return classKubelet(pool.Kubelet)
	}
	return class.Kubelet
}

// nodeSettings is what the node's capacity is computed under: the class's settings and the
// memory share the hypervisor keeps as the scheduler reckons it (--vm-memory-overhead-percent),
// so status.allocatable is what the scheduler planned.
func (l *launcher) nodeSettings(k userdata.Kubelet, class nodeClassSpec) scheduling.NodeSettings {
	ns := clusterstate.NodeClassSettings(nil, class.BlockDeviceMappings, &class.InstanceStorePolicy, class.AMIFamily, l.cfg.VMMemoryOverhead)
	ns.MaxPods, ns.PodsPerCore = k.MaxPods, k.PodsPerCore
	ns.SystemReserved, ns.KubeReserved = k.SystemReserved, k.KubeReserved
	ns.EvictionHard, ns.EvictionSoft = k.EvictionHard, k.EvictionSoft
	return ns
}

// blockDevice is one volume on a launch template.
type blockDevice struct {
	DeviceName          string
	VolumeSizeGiB       int32 // 0: the snapshot's or AMI's
	VolumeType          string
	IOPS, Throughput    *int32
	Encrypted           *bool
	DeleteOnTermination *bool
	KMSKeyID            string
	SnapshotID          string
}

// defaultBlockDevices are the volumes Karpenter gives a family's nodes when the node class
// names none: a 20Gi encrypted gp3 root (AL2, AL2023), or Bottlerocket's 4Gi OS volume and
// 20Gi data volume.
func defaultBlockDevices(amiFamily string) []blockDevice {
	gp3 := func(dev string, gib int32) blockDevice {
		return blockDevice{DeviceName: dev, VolumeSizeGiB: gib, VolumeType: "gp3", Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)}
	}
	if amiFamily == ec2v1.AMIFamilyBottlerocket {
		return []blockDevice{gp3("/dev/xvda", 4), gp3(scheduling.EphemeralDevice(amiFamily), int32(scheduling.DefaultRootVolume/scheduling.GiB))}
	}
	return []blockDevice{gp3(scheduling.EphemeralDevice(amiFamily), int32(scheduling.DefaultRootVolume/scheduling.GiB))}
}

// blockDevices converts the node class's mappings, or gives the family's default. Sizes are
// whole GiB (EC2's unit), rounded up, as clusterstate.BlockDevices reckons them.
func blockDevices(amiFamily string, bdms []*ec2v1.BlockDeviceMapping) ([]blockDevice, error) {
	if len(bdms) == 0 {
		return defaultBlockDevices(amiFamily), nil
	}
	sizes := clusterstate.BlockDevices(bdms)
	out := make([]blockDevice, 0, len(bdms))
	for i, m := range bdms {
		if m == nil || m.DeviceName == nil || *m.DeviceName == "" {
			return nil, fmt.Errorf("blockDeviceMappings[%d]: deviceName is required", i)
		}
		d := blockDevice{DeviceName: *m.DeviceName, VolumeSizeGiB: int32(sizes[i].Size / scheduling.GiB)}
		if e := m.EBS; e != nil {
			d.VolumeType = aws.ToString(e.VolumeType)
			d.Encrypted, d.DeleteOnTermination = e.Encrypted, e.DeleteOnTermination
			d.KMSKeyID, d.SnapshotID = aws.ToString(e.KMSKeyID), aws.ToString(e.SnapshotID)
			if e.IOPS != nil {
				d.IOPS = aws.Int32(int32(*e.IOPS))
			}
			if e.Throughput != nil {
				d.Throughput = aws.Int32(int32(*e.Throughput))
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// request renders the volumes for CreateLaunchTemplate.
func blockDeviceRequest(devs []blockDevice) []ec2types.LaunchTemplateBlockDeviceMappingRequest {
	out := make([]ec2types.LaunchTemplateBlockDeviceMappingRequest, 0, len(devs))
	for _, d := range devs {
		ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{
			Encrypted: d.Encrypted, DeleteOnTermination: d.DeleteOnTermination, Iops: d.IOPS, Throughput: d.Throughput,
		}
		if d.VolumeSizeGiB > 0 {
			ebs.VolumeSize = aws.Int32(d.VolumeSizeGiB)
		}
		if d.VolumeType != "" {
			ebs.VolumeType = ec2types.VolumeType(d.VolumeType)
		}
		if d.KMSKeyID != "" {
			ebs.KmsKeyId = aws.String(d.KMSKeyID)
		}
		if d.SnapshotID != "" {
			ebs.SnapshotId = aws.String(d.SnapshotID)
		}
		out = append(out, ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: aws.String(d.DeviceName), Ebs: ebs})
	}
	return out
}

// String renders a volume for the template's name hash.
func (d blockDevice) String() string {
	return fmt.Sprintf("%s:%d:%s:%v:%v:%v:%v:%s:%s", d.DeviceName, d.VolumeSizeGiB, d.VolumeType, ptrStr(d.IOPS), ptrStr(d.Throughput),
		ptrStr(d.Encrypted), ptrStr(d.DeleteOnTermination), d.KMSKeyID, d.SnapshotID)
}

func ptrStr[T any](p *T) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}
