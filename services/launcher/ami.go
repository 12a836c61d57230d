package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	corev1 "k8s.io/api/core/v1"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
)

// SSMAPI is the slice of SSM the launcher reads: the parameters that name AMIs. *ssm.Client
// satisfies it; tests use the real client against the AWS emulator.
type SSMAPI interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// amiTerm is one of EC2NodeClass's amiSelectorTerms: an alias ("al2023@latest",
// "al2@v20250319", "bottlerocket@latest"), an SSM parameter holding an AMI id, or id / name /
// owner / tags.
type amiTerm struct {
	Alias        string
	ID           string
	SSMParameter string
	Name         string
	Owner        string
	Tags         map[string]string
}

// variant says which instance types an image is for, as Karpenter's requirements on an
// alias's images do: the standard image for types with neither GPUs nor accelerators, the
// nvidia (AL2: gpu) image for GPU types, the neuron image for AWS Neuron types. Images of other
// terms have no variant and serve every type of their architecture.
type variant string

const (
	variantAny      variant = ""
	variantStandard variant = "standard"
	variantNvidia   variant = "nvidia"
	variantNeuron   variant = "neuron"
)

// fits reports whether an image of this variant serves the type.
func (v variant) fits(it *catalogv1.InstanceType) bool {
	switch v {
	case variantStandard:
		return it.GetGpuCount() == 0 && it.GetAcceleratorCount() == 0
	case variantNvidia:
		return it.GetGpuCount() > 0
	case variantNeuron:
		return it.GetAcceleratorCount() > 0
	}
	return true
}

// requirements are the variant's node requirements as Karpenter writes them in status.amis.
func (v variant) requirements() []corev1.NodeSelectorRequirement {
	switch v {
	case variantStandard:
		return []corev1.NodeSelectorRequirement{
			{Key: ec2v1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist},
			{Key: ec2v1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
		}
	case variantNvidia:
		return []corev1.NodeSelectorRequirement{{Key: ec2v1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpExists}}
	case variantNeuron:
		return []corev1.NodeSelectorRequirement{{Key: ec2v1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpExists}}
	}
	return nil
}

// image is a resolved AMI, for the types of one architecture and variant.
type image struct {
	ID         string
	Name       string
	Arch       string // amd64 or arm64
	Variant    variant
	Created    string // RFC 3339, sortable
	Deprecated bool
}

// imageKey is what one resolved image serves: the newest image of each key is launched.
type imageKey struct {
	Arch    string
	Variant variant
}

func (im image) key() imageKey { return imageKey{Arch: im.Arch, Variant: im.Variant} }

// requirements are the image's node requirements, as status.amis lists them.
func (im image) requirements() []corev1.NodeSelectorRequirement {
	return append([]corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{im.Arch}}},
		im.Variant.requirements()...)
}

// better orders images as Karpenter does: a deprecated image only when nothing else is left,
// then the newest, then by name and id so the choice is stable.
func (im image) better(than image) bool {
	if im.Deprecated != than.Deprecated {
		return !im.Deprecated
	}
	if im.Created != than.Created {
		return im.Created > than.Created
	}
	if im.Name != than.Name {
		return im.Name > than.Name
	}
	if im.ID != than.ID {
		return im.ID > than.ID
	}
	return im.Arch+"/"+string(im.Variant) < than.Arch+"/"+string(than.Variant)
}

// imageFor picks the image that serves an instance type, if any.
func imageFor(imgs []image, it *catalogv1.InstanceType) (image, bool) {
	for _, im := range imgs {
		if im.Arch == it.GetArchitecture() && im.Variant.fits(it) {
			return im, true
		}
	}
	return image{}, false
}

// aliasParameter is one SSM parameter an alias reads, and the variants its image serves.
type aliasParameter struct {
	Path     string
	Variants []variant
}

// aliasParameters lists the SSM parameters AWS publishes for an alias's images, for the
// cluster's Kubernetes minor version ("1.32"), at the paths and with the variants Karpenter
// reads (pkg/providers/amifamily: al2023.go, al2.go, bottlerocket.go).
func aliasParameters(alias, k8sMinor string) ([]aliasParameter, error) {
	fam, version, ok := strings.Cut(alias, "@")
	if !ok || version == "" {
		return nil, fmt.Errorf("%w: ami alias %q: want family@version, e.g. al2023@latest", errNodeClassInvalid, alias)
	}
	latest := version == "latest"
	switch strings.ToLower(fam) {
	case "al2023":
		var out []aliasParameter
		for _, a := range []struct {
			arch     string
			variants []variant
		}{{"x86_64", []variant{variantStandard, variantNvidia, variantNeuron}}, {"arm64", []variant{variantStandard, variantNvidia}}} {
			for _, v := range a.variants {
				name := "recommended"
				if !latest {
					name = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", a.arch, v, k8sMinor, version)
				}
				out = append(out, aliasParameter{
					Path:     fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/%s/image_id", k8sMinor, a.arch, v, name),
					Variants: []variant{v},
				})
			}
		}
		return out, nil
	case "al2":
		if _, minor, _ := strings.Cut(k8sMinor, "."); minorAtLeast(minor, 33) {
			return nil, fmt.Errorf("%w: ami alias %q: AL2 aliases are no longer supported on EKS 1.33+ (Kubernetes %s)", errNodeClassInvalid, alias, k8sMinor)
		}
		path := func(flavor, prefix string) string {
			name := "recommended"
			if !latest {
				name = fmt.Sprintf("%s-%s-%s", prefix, k8sMinor, version)
			}
			return fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s/%s/image_id", k8sMinor, flavor, name)
		}
		return []aliasParameter{
			{Path: path("amazon-linux-2", "amazon-eks-node"), Variants: []variant{variantStandard}},
			{Path: path("amazon-linux-2-arm64", "amazon-eks-arm64-node"), Variants: []variant{variantStandard}},
			{Path: path("amazon-linux-2-gpu", "amazon-eks-gpu-node"), Variants: []variant{variantNeuron, variantNvidia}},
		}, nil
	case "bottlerocket":
		// Releases are tagged v1.32.0 on GitHub but named 1.32.0 in SSM: both are accepted.
		v := strings.TrimLeft(version, "v")
		path := func(flavor, arch string) string {
			return fmt.Sprintf("/aws/service/bottlerocket/%s/%s/%s/image_id", flavor, arch, v)
		}
		plain, nvidia := "aws-k8s-"+k8sMinor, "aws-k8s-"+k8sMinor+"-nvidia"
		return []aliasParameter{
			{Path: path(plain, "x86_64"), Variants: []variant{variantStandard, variantNeuron}},
			{Path: path(plain, "arm64"), Variants: []variant{variantStandard}},
			{Path: path(nvidia, "x86_64"), Variants: []variant{variantNvidia}},
			{Path: path(nvidia, "arm64"), Variants: []variant{variantNvidia}},
		}, nil
	}
	return nil, fmt.Errorf("%w: ami alias %q: unknown family %q (want al2, al2023 or bottlerocket)", errNodeClassInvalid, alias, fam)
}

func minorAtLeast(minor string, n int) bool {
	m, err := strconv.Atoi(trimPlus(minor))
	return err == nil && m >= n
}

// parameter reads an SSM parameter; found is false when SSM has no parameter of that name.
func (r *resolver) parameter(ctx context.Context, name string) (value string, found bool, err error) {
	out, err := r.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	var nf *ssmtypes.ParameterNotFound
	switch {
	case errors.As(err, &nf):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("reading SSM parameter %s: %w", name, err)
	}
	return aws.ToString(out.Parameter.Value), true, nil
}

// imageQuery is one DescribeImages call and the variants the images it finds serve (by id;
// images not listed serve every type of their architecture).
type imageQuery struct {
	in       *ec2.DescribeImagesInput
	variants map[string][]variant
}

// queries turns the terms into DescribeImages calls, reading the SSM parameters that aliases
// and ssmParameter terms name. unresolved says why terms found nothing before EC2 was asked.
func (r *resolver) queries(ctx context.Context, terms []amiTerm, k8sMinor string) (qs []imageQuery, unresolved []string, err error) {
	var ids []string
	for _, t := range terms {
		switch {
		case t.Alias != "":
			params, err := aliasParameters(t.Alias, k8sMinor)
			if err != nil {
				return nil, nil, err
			}
			q := imageQuery{variants: map[string][]variant{}}
			var aliasIDs, missing []string
			for _, p := range params {
				id, found, err := r.parameter(ctx, p.Path)
				if err != nil {
					return nil, nil, err
				}
				if !found {
					missing = append(missing, p.Path)
					continue
				}
				if _, seen := q.variants[id]; !seen {
					aliasIDs = append(aliasIDs, id)
				}
				q.variants[id] = append(q.variants[id], p.Variants...)
			}
			if len(aliasIDs) == 0 {
				unresolved = append(unresolved, fmt.Sprintf("alias %s: none of its SSM parameters exist (%s)", t.Alias, strings.Join(missing, ", ")))
				continue
			}
			q.in = &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: aliasIDs}}}
			qs = append(qs, q)
		case t.SSMParameter != "":
			id, found, err := r.parameter(ctx, t.SSMParameter)
			switch {
			case err != nil:
				return nil, nil, err
			case !found:
				unresolved = append(unresolved, fmt.Sprintf("SSM parameter %s not found", t.SSMParameter))
			case !strings.HasPrefix(id, "ami-"):
				unresolved = append(unresolved, fmt.Sprintf("SSM parameter %s holds %q, not an AMI id", t.SSMParameter, id))
			default:
				ids = append(ids, id)
			}
		case t.ID != "":
			ids = append(ids, t.ID)
		default:
			in := &ec2.DescribeImagesInput{}
			if t.Name != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{t.Name}})
				// A name alone could match anyone's public image: only ours and Amazon's, as
				// Karpenter does.
				in.Owners = []string{"self", "amazon"}
			}
			if t.Owner != "" {
				in.Owners = []string{t.Owner}
			}
			in.Filters = append(in.Filters, selectorTerm{Tags: t.Tags}.filters()...)
			qs = append(qs, imageQuery{in: in})
		}
	}
	if len(ids) > 0 {
		qs = append(qs, imageQuery{in: &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: ids}}}})
	}
	return qs, unresolved, nil
}

// images resolves the terms to the newest image of each architecture and variant, sorted so
// that the better image of two that serve a type comes first.
func (r *resolver) images(ctx context.Context, terms []amiTerm, k8sMinor string) ([]image, error) {
	return remember(r, fmt.Sprintf("amis/%s/%v", k8sMinor, terms), func() ([]image, error) {
		qs, unresolved, err := r.queries(ctx, terms, k8sMinor)
		if err != nil {
			return nil, err
		}
		best := map[imageKey]image{}
		for _, q := range qs {
			for page, err := range pages(ctx, ec2.NewDescribeImagesPaginator(r.api, q.in)) {
				if err != nil {
					return nil, fmt.Errorf("describing images: %w", err)
				}
				for _, im := range page.Images {
					r.consider(best, im, q.variants[aws.ToString(im.ImageId)])
				}
			}
		}
		out := slices.Collect(maps.Values(best))
		if len(out) == 0 {
			// Not remembered: a parameter or image made now is found on the next try.
			why := ""
			if len(unresolved) > 0 {
				why = ": " + strings.Join(unresolved, "; ")
			}
			return nil, fmt.Errorf("no image matches the node class's amiSelectorTerms (Kubernetes %s)%s", k8sMinor, why)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].better(out[j]) })
		return out, nil
	})
}

// consider keeps an image described by EC2 as the best of its architecture and each variant
// it serves.
func (r *resolver) consider(best map[imageKey]image, im ec2types.Image, variants []variant) {
	var arch string
	switch im.Architecture {
	case ec2types.ArchitectureValuesX8664:
		arch = "amd64"
	case ec2types.ArchitectureValuesArm64:
		arch = "arm64"
	default:
		return // no instance type of ours runs it
	}
	deprecated := false
	if dt := aws.ToString(im.DeprecationTime); dt != "" {
		if t, err := time.Parse(time.RFC3339, dt); err == nil && !t.After(r.now()) {
			deprecated = true
		}
	}
	if len(variants) == 0 {
		variants = []variant{variantAny}
	}
	for _, v := range variants {
		cand := image{ID: aws.ToString(im.ImageId), Name: aws.ToString(im.Name), Arch: arch, Variant: v,
			Created: aws.ToString(im.CreationDate), Deprecated: deprecated}
		if cur, ok := best[cand.key()]; !ok || cand.better(cur) {
			best[cand.key()] = cand
		}
	}
}
