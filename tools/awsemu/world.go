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
	params          map[string]Parameter   // the public SSM parameters naming images
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
	// Of the EKS-optimized images only: the Kubernetes minor version, the variant (standard,
	// nvidia, neuron) and the release ("v20250319"; "1.32.0" for Bottlerocket), from which the
	// public SSM parameters naming them are derived (ssm.go).
	K8s, Variant, Release string
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
	w.params = publicParameters(w.images)
	for _, t := range catalog.All() {
		if t.Complete() {
			w.typeIndex[t.Name] = len(w.types)
			w.types = append(w.types, t)
		}
	}
	return w
}

// eksImages returns the EKS-optimized images the emulator offers: AL2, AL2023 and
// Bottlerocket, amd64 and arm64, Kubernetes 1.31 and 1.32, three dated releases each, in the
// variants AWS publishes (AL2023 standard, nvidia and — x86_64 only — neuron; AL2 standard and
// the x86_64 GPU image; Bottlerocket standard and nvidia), plus one self-owned custom image
// tagged for discovery.
func eksImages(cfg Config) []image {
	releases := []time.Time{
		time.Date(2025, 1, 15, 0, 0, 0, 0, time.UTC),
		time.Date(2025, 2, 12, 0, 0, 0, 0, time.UTC),
		time.Date(2025, 3, 19, 0, 0, 0, 0, time.UTC),
	}
	var out []image
	add := func(im image) {
		im.ID, im.OwnerAlias = stableID("ami", im.Name), "amazon"
		out = append(out, im)
	}
	for _, k8s := range []string{"1.31", "1.32"} {
		for ri, rel := range releases {
			release := "v" + rel.Format("20060102")
			for _, arch := range []string{"x86_64", "arm64"} {
				eks := image{Owner: ownerEKS, Arch: arch, Created: rel, K8s: k8s, Release: release, Variant: "standard"}

				al2 := eks
				al2.Family, al2.Description = "AL2", "EKS Kubernetes Worker AMI with AmazonLinux2 image"
				al2.Name = "amazon-eks-node-" + k8s + "-" + release
				if arch == "arm64" {
					al2.Name = "amazon-eks-arm64-node-" + k8s + "-" + release
				}
				add(al2)
				if arch == "x86_64" {
					// One AL2 GPU image serves NVIDIA and Neuron types alike.
					gpu := al2
					gpu.Name, gpu.Variant = "amazon-eks-gpu-node-"+k8s+"-"+release, "gpu"
					gpu.Description = "EKS Kubernetes Worker AMI with AmazonLinux2 image, (k8s: " + k8s + ", containerd, GPU)"
					add(gpu)
				}

				variants := []string{"standard", "nvidia"}
				if arch == "x86_64" {
					variants = append(variants, "neuron")
				}
				for _, v := range variants {
					al2023 := eks
					al2023.Family, al2023.Variant = "AL2023", v
					al2023.Name = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", arch, v, k8s, release)
					al2023.Description = "EKS-optimized Kubernetes node based on Amazon Linux 2023, (k8s: " + k8s + ", variant: " + v + ")"
					add(al2023)
				}

				brArch := arch
				if arch == "arm64" {
					brArch = "aarch64"
				}
				for _, v := range []string{"standard", "nvidia"} {
					br := eks
					br.Family, br.Owner, br.Variant, br.Release = "Bottlerocket", ownerBottlerocket, v, fmt.Sprintf("1.3%d.0", ri)
					flavor := "aws-k8s-" + k8s
					if v == "nvidia" {
						flavor += "-nvidia"
					}
					br.Name = fmt.Sprintf("bottlerocket-%s-%s-v%s-%08x", flavor, brArch, br.Release, ri*0x1111111)
					br.Description = "bottlerocket-" + flavor
					add(br)
				}
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

// Owners of the EKS-optimized images, as AWS publishes them.
const (
	ownerEKS          = "602401143452"
	ownerBottlerocket = "092701018921"
)

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
