package awsemu

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

// Tag is an EC2 tag.
type Tag struct {
	Key   string `json:"key" xml:"key"`
	Value string `json:"value" xml:"value"`
}

// world is the static part of the account: it is built once and never changes, so handlers
// read it without the lock.
type world struct {
	region, account string
	zones           []zone
	vpcID           string
	subnets         []subnet
	groups          []securityGroup
	images          []image
	types           []catalog.InstanceType // complete types only, sorted by name
	typeIndex       map[string]int
}

type zone struct {
	Name, ID string
}

type subnet struct {
	ID, Zone, ZoneID, CIDR string
	base                   [4]byte // network address
	size                   int     // usable addresses
	Tags                   []Tag
}

type securityGroup struct {
	ID, Name, Description string
	Tags                  []Tag
}

type image struct {
	ID, Name, Description, Owner, OwnerAlias, Arch, Family string
	Created                                                time.Time
	Tags                                                   []Tag
}

// stableID derives an AWS-style ID (prefix-<17 hex>) from a name, so static resources keep
// their IDs across runs.
func stableID(prefix, name string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("%s-0%016x", prefix, h.Sum64())
}

// zoneIDPrefix shortens a region the way AZ IDs do: us-east-1 → use1, ap-southeast-2 → apse2.
func zoneIDPrefix(region string) string {
	parts := strings.Split(region, "-")
	if len(parts) < 3 {
		return region
	}
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1 : len(parts)-1] {
		switch {
		case strings.HasPrefix(p, "south") && len(p) > 5, strings.HasPrefix(p, "north") && len(p) > 5:
			b.WriteByte(p[0])
			b.WriteByte(p[5])
		case p != "":
			b.WriteByte(p[0])
		}
	}
	b.WriteString(parts[len(parts)-1])
	return b.String()
}

func newWorld(cfg Config) *world {
	w := &world{region: cfg.Region, account: cfg.AccountID, typeIndex: map[string]int{}}
	w.vpcID = stableID("vpc", cfg.ClusterName)
	discovery := Tag{Key: "karpenter.sh/discovery", Value: cfg.ClusterName}
	for i, z := range cfg.Zones {
		zid := fmt.Sprintf("%s-az%d", zoneIDPrefix(cfg.Region), i+1)
		w.zones = append(w.zones, zone{Name: z, ID: zid})
		w.subnets = append(w.subnets, subnet{
			ID: stableID("subnet", cfg.ClusterName+"/"+z), Zone: z, ZoneID: zid,
			CIDR: fmt.Sprintf("10.0.%d.0/20", i*16), base: [4]byte{10, 0, byte(i * 16), 0}, size: 4096 - 5,
			Tags: []Tag{
				{Key: "Name", Value: cfg.ClusterName + "-private-" + z},
				discovery,
				{Key: "kubernetes.io/role/internal-elb", Value: "1"},
			},
		})
	}
	w.groups = []securityGroup{
		{ID: stableID("sg", cfg.ClusterName+"/default"), Name: "default", Description: "default VPC security group"},
		{ID: stableID("sg", cfg.ClusterName+"/node"), Name: cfg.ClusterName + "-node", Description: "EKS node security group",
			Tags: []Tag{{Key: "Name", Value: cfg.ClusterName + "-node"}, discovery}},
	}
	w.images = eksImages(cfg)
	for _, t := range catalog.All() {
		if t.Complete() {
			w.typeIndex[t.Name] = len(w.types)
			w.types = append(w.types, t)
		}
	}
	return w
}

// eksImages returns the EKS-optimized images the emulator offers: AL2, AL2023 and
// Bottlerocket, amd64 and arm64, Kubernetes 1.31 and 1.32, three dated releases each, plus one
// self-owned custom image tagged for discovery.
func eksImages(cfg Config) []image {
	releases := []time.Time{
		time.Date(2025, 1, 15, 0, 0, 0, 0, time.UTC),
		time.Date(2025, 2, 12, 0, 0, 0, 0, time.UTC),
		time.Date(2025, 3, 19, 0, 0, 0, 0, time.UTC),
	}
	var out []image
	add := func(name, desc, family, arch, owner string, created time.Time) {
		out = append(out, image{
			ID: stableID("ami", name), Name: name, Description: desc, Owner: owner, OwnerAlias: "amazon",
			Arch: arch, Family: family, Created: created,
		})
	}
	for _, k8s := range []string{"1.31", "1.32"} {
		for ri, rel := range releases {
			date := rel.Format("20060102")
			for _, arch := range []string{"x86_64", "arm64"} {
				al2 := "amazon-eks-node-" + k8s + "-v" + date
				if arch == "arm64" {
					al2 = "amazon-eks-arm64-node-" + k8s + "-v" + date
				}
				add(al2, "EKS Kubernetes Worker AMI with AmazonLinux2 image", "AL2", arch, "602401143452", rel)
				add(fmt.Sprintf("amazon-eks-node-al2023-%s-standard-%s-v%s", arch, k8s, date),
					"EKS-optimized Kubernetes node based on Amazon Linux 2023", "AL2023", arch, "602401143452", rel)
				brArch := arch
				if arch == "arm64" {
					brArch = "aarch64"
				}
				add(fmt.Sprintf("bottlerocket-aws-k8s-%s-%s-v1.3%d.0-%08x", k8s, brArch, ri, ri*0x1111111),
					"bottlerocket-aws-k8s-"+k8s, "Bottlerocket", arch, "092701018921", rel)
			}
		}
	}
	custom := "fleetwright-custom-al2023-" + cfg.ClusterName
	out = append(out, image{
		ID: stableID("ami", custom), Name: custom, Description: "custom image owned by this account",
		Owner: cfg.AccountID, Arch: "x86_64", Family: "AL2023", Created: releases[2],
		Tags: []Tag{{Key: "karpenter.sh/discovery", Value: cfg.ClusterName}},
	})
	return out
}

func (w *world) subnetByID(id string) (subnet, bool) {
	for _, s := range w.subnets {
		if s.ID == id {
			return s, true
		}
	}
	return subnet{}, false
}

func (w *world) subnetInZone(z string) (subnet, bool) {
	for _, s := range w.subnets {
		if s.Zone == z {
			return s, true
		}
	}
	return subnet{}, false
}

func (w *world) hasZone(z string) bool {
	_, ok := w.subnetInZone(z)
	return ok
}

func (w *world) instanceType(name string) (catalog.InstanceType, bool) {
	i, ok := w.typeIndex[name]
	if !ok {
		return catalog.InstanceType{}, false
	}
	return w.types[i], true
}

func (w *world) imageByID(id string) (image, bool) {
	for _, im := range w.images {
		if im.ID == id {
			return im, true
		}
	}
	return image{}, false
}
