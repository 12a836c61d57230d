package clusterstate

import (
	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// KubeletConfig converts a node class's kubelet settings to their wire form: the LaunchIntent
// carries them (the scheduler planned with them) and the launcher renders them; nil for none.
func KubeletConfig(k *ec2v1.KubeletConfiguration) *launchv1.KubeletConfig {
	if k == nil {
		return nil
	}
	out := &launchv1.KubeletConfig{
		MaxPods: k.MaxPods, PodsPerCore: k.PodsPerCore,
		SystemReserved: k.SystemReserved, KubeReserved: k.KubeReserved,
		EvictionHard: k.EvictionHard, EvictionSoft: k.EvictionSoft,
		EvictionMaxPodGracePeriod:   k.EvictionMaxPodGracePeriod,
		ImageGcHighThresholdPercent: k.ImageGCHighThresholdPercent, ImageGcLowThresholdPercent: k.ImageGCLowThresholdPercent,
		CpuCfsQuota: k.CPUCFSQuota, ClusterDns: k.ClusterDNS,
	}
	if len(k.EvictionSoftGracePeriod) > 0 {
		out.EvictionSoftGracePeriod = map[string]string{}
		for n, d := range k.EvictionSoftGracePeriod {
			out.EvictionSoftGracePeriod[n] = d.Duration.String()
		}
	}
	return out
}
