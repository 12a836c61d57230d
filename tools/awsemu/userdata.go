package awsemu

import (
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/userdata"
)

// The node labels and taints a launch template's user data asks the kubelet for are read by
// pkg/userdata, the same package the launcher writes them with, in the three forms EKS
// images understand: AL2 bootstrap.sh kubelet flags, AL2023 nodeadm NodeConfig (kubelet flags
// and registerWithTaints, usually inside MIME multipart), and Bottlerocket TOML.

// kubeletSettings is what user data asks of the kubelet.
type kubeletSettings struct {
	Labels       map[string]string
	Taints       []corev1.Taint
	Registration userdata.Registration // all of it: kubelet settings, instance-store policy, family
}

// nodeSettings is what the instance's node registers its capacity under, as a kubelet and the
// AMI's bootstrap would: the user data's kubelet settings and instance-store policy, the
// volume of the family's ephemeral device on the template (scheduling.RootVolumeSize), and the
// share of memory a real hypervisor keeps (scheduling.VMMemoryOverhead).
func nodeSettings(reg userdata.Registration, devs []BlockDevice) scheduling.NodeSettings {
	var bds []scheduling.BlockDevice
	for _, d := range devs {
		bds = append(bds, scheduling.BlockDevice{DeviceName: d.DeviceName, Size: int64(d.VolumeSizeGiB) * scheduling.GiB})
	}
	family := string(reg.Family)
	k := reg.Kubelet
	return scheduling.NodeSettings{
		MaxPods: k.MaxPods, PodsPerCore: k.PodsPerCore,
		SystemReserved: k.SystemReserved, KubeReserved: k.KubeReserved,
		EvictionHard: k.EvictionHard, EvictionSoft: k.EvictionSoft,
		RootVolume: scheduling.RootVolumeSize(family, bds), RAID0: reg.InstanceStorePolicy == userdata.RAID0,
		AMIFamily: family, VMMemoryOverhead: scheduling.VMMemoryOverhead,
	}
}

// decodeUserData undoes the base64 of LaunchTemplateData.UserData.
func decodeUserData(b64 string) (string, error) {
	if b64 == "" {
		return "", nil
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("decoding user data: %w", err)
	}
	return string(raw), nil
}

// parseKubeletSettings reads labels and taints from decoded user data.
func parseKubeletSettings(doc string) (kubeletSettings, error) {
	reg, err := userdata.Parse(doc)
	if err != nil {
		return kubeletSettings{Labels: map[string]string{}}, fmt.Errorf("reading user data: %w", err)
	}
	s := kubeletSettings{Labels: reg.Labels, Registration: reg}
	for _, t := range reg.Taints {
		s.Taints = append(s.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return s, nil
}
