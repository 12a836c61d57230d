package scheduling

import (
	"maps"
	"slices"
	"testing"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

// A type's labels are exactly Karpenter's, as its instance-type reference lists them (the
// provider's website, reference/instance-types.md, at the catalog's commit), the sustained clock
// speed, encryption in transit and flex capability included.
func TestTypeLabelsAreKarpenters(t *testing.T) {
	for name, want := range map[string]map[string]string{
		"c5.large": {
			"karpenter.k8s.aws/instance-capability-flex": "false", "karpenter.k8s.aws/instance-category": "c",
			"karpenter.k8s.aws/instance-cpu": "2", "karpenter.k8s.aws/instance-cpu-manufacturer": "intel",
			"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "3400", "karpenter.k8s.aws/instance-ebs-bandwidth": "4750",
			"karpenter.k8s.aws/instance-encryption-in-transit-supported": "false", "karpenter.k8s.aws/instance-family": "c5",
			"karpenter.k8s.aws/instance-generation": "5", "karpenter.k8s.aws/instance-hypervisor": "nitro",
			"karpenter.k8s.aws/instance-memory": "4096", "karpenter.k8s.aws/instance-network-bandwidth": "750",
			"karpenter.k8s.aws/instance-size": "large", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
			"node.kubernetes.io/instance-type": "c5.large",
		},
		"m7i-flex.large": {
			"karpenter.k8s.aws/instance-capability-flex": "true", "karpenter.k8s.aws/instance-category": "m",
			"karpenter.k8s.aws/instance-cpu": "2", "karpenter.k8s.aws/instance-cpu-manufacturer": "intel",
			"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "3200", "karpenter.k8s.aws/instance-ebs-bandwidth": "10000",
			"karpenter.k8s.aws/instance-encryption-in-transit-supported": "true", "karpenter.k8s.aws/instance-family": "m7i-flex",
			"karpenter.k8s.aws/instance-generation": "7", "karpenter.k8s.aws/instance-hypervisor": "nitro",
			"karpenter.k8s.aws/instance-memory": "8192", "karpenter.k8s.aws/instance-network-bandwidth": "390",
			"karpenter.k8s.aws/instance-size": "large", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
			"node.kubernetes.io/instance-type": "m7i-flex.large",
		},
		"g4dn.xlarge": {
			"karpenter.k8s.aws/instance-capability-flex": "false", "karpenter.k8s.aws/instance-category": "g",
			"karpenter.k8s.aws/instance-cpu": "4", "karpenter.k8s.aws/instance-cpu-manufacturer": "intel",
			"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "2500", "karpenter.k8s.aws/instance-ebs-bandwidth": "3500",
			"karpenter.k8s.aws/instance-encryption-in-transit-supported": "true", "karpenter.k8s.aws/instance-family": "g4dn",
			"karpenter.k8s.aws/instance-generation": "4", "karpenter.k8s.aws/instance-gpu-count": "1",
			"karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia", "karpenter.k8s.aws/instance-gpu-memory": "16384",
			"karpenter.k8s.aws/instance-gpu-name": "t4", "karpenter.k8s.aws/instance-hypervisor": "nitro",
			"karpenter.k8s.aws/instance-local-nvme": "125", "karpenter.k8s.aws/instance-memory": "16384",
			"karpenter.k8s.aws/instance-network-bandwidth": "5000", "karpenter.k8s.aws/instance-size": "xlarge",
			"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "g4dn.xlarge",
		},
	} {
		ct, ok := catalog.Lookup(name)
		if !ok {
			t.Fatalf("%s is not in the catalog", name)
		}
		got := TypeLabels(ct)
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if got[k] != want[k] {
				t.Errorf("%s: %s = %q, want %q", name, k, got[k], want[k])
			}
		}
		for _, k := range slices.Sorted(maps.Keys(got)) {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: label %s = %q, which Karpenter does not set", name, k, got[k])
			}
		}
	}
}
