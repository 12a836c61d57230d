package clusterstate

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/ec2/v1alpha1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
	"github.com/fleetwright/fleetwright/pkg/apis/translate"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// Pool is a NodePool as the services act on it: a karpenter.sh/v1 NodePool, or a v1alpha5
// Provisioner translated into the v1 model. Pools is the one place that translation happens.
type Pool struct {
	*karpv1.NodePool
	UID    types.UID // the NodePool's, or the Provisioner's
	Legacy bool      // translated from a Provisioner
	// Kubelet is the pool's kubelet configuration: its EC2NodeClass's (when the cache holds node
	// classes) or, for a Provisioner, its own.
	Kubelet *ec2v1.KubeletConfiguration
	// BlockDeviceMappings, InstanceStorePolicy and AMIFamily are the node class's (or the
	// Provisioner's AWSNodeTemplate's), which decide its nodes' ephemeral storage.
	BlockDeviceMappings []*ec2v1.BlockDeviceMapping
	InstanceStorePolicy *string
	AMIFamily           string
	// Zones are those of the subnets the launcher resolved for the node class (its status), in
	// which alone its nodes can launch; nil while unknown (not resolved yet, or an
	// AWSNodeTemplate), when the launcher's subnet choice is the only limit.
	Zones []string
	// ZoneIDs maps those zones to their ids (topology.k8s.aws/zone-id), from the same subnets.
	ZoneIDs map[string]string
	// NodeClassHash is the hash of the pool's EC2NodeClass (EC2NodeClass.Hash) that a NodeClaim
	// made now records; "" while unknown (the cache holds no node classes, the class does not
	// exist, or a Provisioner's AWSNodeTemplate, whose translation depends on the launcher's
	// settings: the launcher records the hash of the class it launched with in any case).
	NodeClassHash string
}

// NodeSettings is what the pool's node class decides about its nodes' capacity, for
// scheduling.NodeResources; vmOverhead is the share of memory the hypervisor keeps.
func (p Pool) NodeSettings(vmOverhead float64) scheduling.NodeSettings {
	return NodeClassSettings(p.Kubelet, p.BlockDeviceMappings, p.InstanceStorePolicy, p.AMIFamily, vmOverhead)
}

// NodeClassSettings is what a node class's kubelet settings, block device mappings,
// instance-store policy and AMI family decide about its nodes' capacity.
func NodeClassSettings(k *ec2v1.KubeletConfiguration, bdms []*ec2v1.BlockDeviceMapping, instanceStorePolicy *string, amiFamily string, vmOverhead float64) scheduling.NodeSettings {
	ns := scheduling.NodeSettings{AMIFamily: amiFamily, VMMemoryOverhead: vmOverhead,
		RootVolume: scheduling.RootVolumeSize(amiFamily, BlockDevices(bdms)),
		RAID0:      instanceStorePolicy != nil && *instanceStorePolicy == "RAID0"}
	if k != nil {
		ns.MaxPods, ns.PodsPerCore = k.MaxPods, k.PodsPerCore
		ns.SystemReserved, ns.KubeReserved = k.SystemReserved, k.KubeReserved
		ns.EvictionHard, ns.EvictionSoft = k.EvictionHard, k.EvictionSoft
	}
	return ns
}

// BlockDevices reads block device mappings for scheduling.RootVolumeSize. Sizes are whole GiB,
// rounded up, as EC2 makes the volumes.
func BlockDevices(bdms []*ec2v1.BlockDeviceMapping) []scheduling.BlockDevice {
	var out []scheduling.BlockDevice
	for _, m := range bdms {
		if m == nil {
			continue
		}
		d := scheduling.BlockDevice{RootVolume: m.RootVolume}
		if m.DeviceName != nil {
			d.DeviceName = *m.DeviceName
		}
		if m.EBS != nil && m.EBS.VolumeSize != nil {
			d.Size = (m.EBS.VolumeSize.Value() + scheduling.GiB - 1) / scheduling.GiB * scheduling.GiB
		}
		out = append(out, d)
	}
	return out
}

// Pools returns the pools, those being deleted included (DeletionTimestamp says which: the
// scheduler plans no new capacity on them, the terminator still applies their policies). A
// Provisioner that does not translate, or whose name a NodePool already uses, is skipped and
// logged once per change of it.
func (c *Cache) Pools() []Pool {
	var out []Pool
	taken := map[string]bool{}
	for _, np := range List[karpv1.NodePool](c.NodePools, c.undecodable("nodepool")) {
		taken[np.Name] = true
		p := Pool{NodePool: np, UID: np.UID}
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && c.NodeClasses != nil {
			if nc, ok := Get[ec2v1.EC2NodeClass](c.NodeClasses, ref.Name); ok {
				p.Kubelet = nc.Spec.Kubelet
				p.BlockDeviceMappings, p.InstanceStorePolicy = nc.Spec.BlockDeviceMappings, nc.Spec.InstanceStorePolicy
				p.AMIFamily = nc.ResolvedAMIFamily()
				p.Zones, p.ZoneIDs = subnetZones(nc.Status.Subnets), subnetZoneIDs(nc.Status.Subnets)
				p.NodeClassHash = nc.Hash()
			}
		}
		out = append(out, p)
	}
	if c.Provisioners == nil {
		return out
	}
	for _, prov := range List[v1alpha5.Provisioner](c.Provisioners, c.undecodable("provisioner")) {
		warn := func(msg string, err error, fields ...string) {
			c.once("provisioner/"+prov.Name+"/"+msg, prov.ResourceVersion, func() {
				e := c.log.Warn().Err(err).Str("provisioner", prov.Name)
				for i := 0; i+1 < len(fields); i += 2 {
					e = e.Str(fields[i], fields[i+1])
				}
				e.Msg(msg)
			})
		}
		if taken[prov.Name] {
			warn("skipping provisioner: a nodepool of the same name exists", nil)
			continue
		}
		np, err := translate.NodePool(prov)
		if err != nil {
			warn("skipping provisioner that does not translate", err)
			continue
		}
		np.DeletionTimestamp = prov.DeletionTimestamp
		var tmpl *v1alpha1.AWSNodeTemplate
		if ref := prov.Spec.ProviderRef; ref != nil && c.Templates != nil {
			t, ok := Get[v1alpha1.AWSNodeTemplate](c.Templates, ref.Name)
			if !ok {
				warn("provisioner refers to an awsnodetemplate that does not exist", nil, "awsnodetemplate", ref.Name)
			}
			tmpl = t
		} else if prov.Spec.Provider != nil {
			tmpl, _ = translate.ProviderNodeTemplate(prov)
		}
		kubelet, err := translate.KubeletOf(np)
		if err != nil {
			warn("ignoring unreadable kubelet settings", err)
		}
		p := Pool{NodePool: np, UID: prov.UID, Legacy: true, Kubelet: kubelet}
		if tmpl != nil {
			p.AMIFamily, p.BlockDeviceMappings = translate.NodeVolumes(tmpl)
		}
		out = append(out, p)
	}
	return out
}

// ErrNoNodeClass is wrapped by NodeClass when neither generation has the class.
var ErrNoNodeClass = fmt.Errorf("node class not found")

// NodeClass returns the EC2NodeClass of the name or, for v1alpha5 users whose Provisioner
// named an AWSNodeTemplate, the AWSNodeTemplate of that name translated into one. kind is the
// reference's kind: "AWSNodeTemplate" looks only there, anything else tries the EC2NodeClass
// first. A template that does not translate is an error that retrying will not fix.
func (c *Cache) NodeClass(kind, name string, opts translate.Options) (*ec2v1.EC2NodeClass, error) {
	if kind != "AWSNodeTemplate" {
		if nc, ok := Get[ec2v1.EC2NodeClass](c.NodeClasses, name); ok {
			return nc, nil
		}
	}
	if c.Templates != nil {
		if t, ok := Get[v1alpha1.AWSNodeTemplate](c.Templates, name); ok {
			nc, err := translate.EC2NodeClass(t, opts)
			if err != nil {
				return nil, fmt.Errorf("translating AWSNodeTemplate %s: %w", name, err)
			}
			return nc, nil
		}
	}
	return nil, fmt.Errorf("%w: no EC2NodeClass or AWSNodeTemplate named %q", ErrNoNodeClass, name)
}

// subnetZoneIDs maps the resolved subnets' zones to their zone ids (nil: none known).
func subnetZoneIDs(subnets []ec2v1.Subnet) map[string]string {
	var ids map[string]string
	for _, s := range subnets {
		if s.Zone != "" && s.ZoneID != "" {
			if ids == nil {
				ids = map[string]string{}
			}
			ids[s.Zone] = s.ZoneID
		}
	}
	return ids
}

// subnetZones are the distinct zones of resolved subnets, sorted.
func subnetZones(subnets []ec2v1.Subnet) []string {
	var zones []string
	for _, s := range subnets {
		if s.Zone != "" && !slices.Contains(zones, s.Zone) {
			zones = append(zones, s.Zone)
		}
	}
	slices.Sort(zones)
	return zones
}
