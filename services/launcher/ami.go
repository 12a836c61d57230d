package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// amiTerm is one of EC2NodeClass's amiSelectorTerms: an alias ("al2023@latest",
// "al2@v20250319", "bottlerocket@latest") or id / name / owner / tags.
type amiTerm struct {
	Alias string
	ID    string
	Name  string
	Owner string
	Tags  map[string]string
}

// image is a resolved AMI.
type image struct {
	ID      string
	Name    string
	Arch    string // amd64 or arm64
	Created string // RFC 3339, sortable
}

// Owners of the EKS-optimized images, as AWS publishes them.
const (
	ownerEKS          = "602401143452"
	ownerBottlerocket = "092701018921"
)

// aliasQuery turns an alias into the DescribeImages name patterns and owner that find it, for
// the cluster's Kubernetes minor version ("1.32"). Karpenter reads SSM parameters for aliases;
// the image names encode the same facts, and the emulator has no SSM.
func aliasQuery(alias, k8sMinor string) (family string, names []string, owner string, err error) {
	fam, version, ok := strings.Cut(alias, "@")
	if !ok || version == "" {
		return "", nil, "", fmt.Errorf("%w: ami alias %q: want family@version, e.g. al2023@latest", errNodeClassInvalid, alias)
	}
	v := "v*"
	if version != "latest" {
		v = version
	}
	switch strings.ToLower(fam) {
	case "al2023":
		return "AL2023", []string{
			"amazon-eks-node-al2023-x86_64-standard-" + k8sMinor + "-" + v,
			"amazon-eks-node-al2023-arm64-standard-" + k8sMinor + "-" + v,
		}, ownerEKS, nil
	case "al2":
		return "AL2", []string{
			"amazon-eks-node-" + k8sMinor + "-" + v,
			"amazon-eks-arm64-node-" + k8sMinor + "-" + v,
		}, ownerEKS, nil
	case "bottlerocket":
		br := "v*"
		if version != "latest" {
			br = version + "-*"
		}
		return "Bottlerocket", []string{
			"bottlerocket-aws-k8s-" + k8sMinor + "-x86_64-" + br,
			"bottlerocket-aws-k8s-" + k8sMinor + "-aarch64-" + br,
		}, ownerBottlerocket, nil
	}
	return "", nil, "", fmt.Errorf("%w: ami alias %q: unknown family %q (want al2, al2023 or bottlerocket)", errNodeClassInvalid, alias, fam)
}

// images resolves the terms to the newest image per architecture.
func (r *resolver) images(ctx context.Context, terms []amiTerm, k8sMinor string) (map[string]image, error) {
	v, err := r.remember(fmt.Sprintf("amis/%s/%v", k8sMinor, terms), func() (any, error) {
		newest := map[string]image{}
		for _, t := range terms {
			in := &ec2.DescribeImagesInput{}
			switch {
			case t.Alias != "":
				_, names, owner, err := aliasQuery(t.Alias, k8sMinor)
				if err != nil {
					return nil, err
				}
				in.Owners = []string{owner}
				in.Filters = []ec2types.Filter{{Name: aws.String("name"), Values: names}}
			case t.ID != "":
				in.ImageIds = []string{t.ID}
			default:
				if t.Name != "" {
					in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{t.Name}})
				}
				if t.Owner != "" {
					in.Owners = []string{t.Owner}
				}
				in.Filters = append(in.Filters, selectorTerm{Tags: t.Tags}.filters()...)
			}
			out, err := r.api.DescribeImages(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("describing images: %w", err)
			}
			for _, im := range out.Images {
				arch := "amd64"
				if im.Architecture == ec2types.ArchitectureValuesArm64 {
					arch = "arm64"
				}
				cand := image{ID: aws.ToString(im.ImageId), Name: aws.ToString(im.Name), Arch: arch, Created: aws.ToString(im.CreationDate)}
				if cur, ok := newest[arch]; !ok || cand.Created > cur.Created || (cand.Created == cur.Created && cand.ID > cur.ID) {
					newest[arch] = cand
				}
			}
		}
		return newest, nil
	})
	if err != nil {
		return nil, err
	}
	imgs := v.(map[string]image)
	if len(imgs) == 0 {
		return nil, fmt.Errorf("no image matches the node class's amiSelectorTerms %v (Kubernetes %s)", terms, k8sMinor)
	}
	return imgs, nil
}

// archs lists the architectures images were found for, sorted.
func archs(imgs map[string]image) []string {
	out := make([]string, 0, len(imgs))
	for a := range imgs {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}
