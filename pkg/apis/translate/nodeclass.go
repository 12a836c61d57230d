package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/ec2/v1alpha1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
)

// Options are the cluster-wide settings v1alpha5 took from elsewhere.
type Options struct {
	// DefaultInstanceProfile stands in for a template without instanceProfile, as v1alpha5's
	// aws.defaultInstanceProfile setting did. v1 requires one of role and instanceProfile.
	DefaultInstanceProfile string
	// Kubelet settings for the EC2NodeClass, which v1alpha5 kept on the Provisioner: see
	// Kubelet and KubeletOf.
	Kubelet *ec2v1.KubeletConfiguration
}

// v1alpha5 defaults that differ from v1's.
const (
	defaultAMIFamily = ec2v1.AMIFamilyAL2
	// v1alpha5 launched with a hop limit of 2; v1's default is 1.
	defaultHopLimit int64 = 2
)

// EC2NodeClass translates an AWSNodeTemplate into the EC2NodeClass of the same name.
func EC2NodeClass(t *v1alpha1.AWSNodeTemplate, opts Options) (*ec2v1.EC2NodeClass, error) {
	nc, err := nodeClass(t.Name, t.Spec, opts)
	if err != nil {
		return nil, fmt.Errorf("translating awsnodetemplate %s: %w", t.Name, err)
	}
	nc.Labels = maps.Clone(t.Labels)
	return nc, nil
}

// ProviderNodeTemplate reads a Provisioner's inline provider as the AWSNodeTemplate it
// stands for, named after the Provisioner (which NodePool points its nodeClassRef at). An
// unknown field in the provider is an error, not ignored.
func ProviderNodeTemplate(p *v1alpha5.Provisioner) (*v1alpha1.AWSNodeTemplate, error) {
	if p.Spec.Provider == nil {
		return nil, fmt.Errorf("reading provider of provisioner %s: none set", p.Name)
	}
	var provider struct {
		metav1.TypeMeta              `json:",inline"`
		v1alpha1.AWSNodeTemplateSpec `json:",inline"`
	}
	dec := json.NewDecoder(bytes.NewReader(p.Spec.Provider.Raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&provider); err != nil {
		return nil, fmt.Errorf("reading provider of provisioner %s: %w", p.Name, err)
	}
	return &v1alpha1.AWSNodeTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "AWSNodeTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name},
		Spec:       provider.AWSNodeTemplateSpec,
	}, nil
}

func nodeClass(name string, s v1alpha1.AWSNodeTemplateSpec, opts Options) (*ec2v1.EC2NodeClass, error) {
	if s.LaunchTemplateName != nil {
		return nil, fmt.Errorf("launchTemplate %q: v1 launches without user-managed launch templates", *s.LaunchTemplateName)
	}
	subnets, err := idOrTagTerms("subnetSelector", s.SubnetSelector, func(tags map[string]string, id string) ec2v1.SubnetSelectorTerm {
		return ec2v1.SubnetSelectorTerm{Tags: tags, ID: id}
	})
	if err != nil {
		return nil, err
	}
	groups, err := idOrTagTerms("securityGroupSelector", s.SecurityGroupSelector, func(tags map[string]string, id string) ec2v1.SecurityGroupSelectorTerm {
		return ec2v1.SecurityGroupSelectorTerm{Tags: tags, ID: id}
	})
	if err != nil {
		return nil, err
	}
	family, amis, err := amiTerms(s.AMIFamily, s.AMISelector)
	if err != nil {
		return nil, err
	}
	profile := opts.DefaultInstanceProfile
	if s.InstanceProfile != nil {
		profile = *s.InstanceProfile
	}
	if profile == "" {
		return nil, fmt.Errorf("no instanceProfile, and no default instance profile given")
	}
	return &ec2v1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: ec2v1.SchemeGroupVersion.String(), Kind: "EC2NodeClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: ec2v1.EC2NodeClassSpec{
			SubnetSelectorTerms:        subnets,
			SecurityGroupSelectorTerms: groups,
			AMISelectorTerms:           amis,
			AMIFamily:                  &family,
			UserData:                   clonePtr(s.UserData),
			InstanceProfile:            &profile,
			Tags:                       maps.Clone(s.Tags),
			Kubelet:                    opts.Kubelet.DeepCopy(),
			BlockDeviceMappings:        blockDevices(s.BlockDeviceMappings),
			DetailedMonitoring:         clonePtr(s.DetailedMonitoring),
			MetadataOptions:            metadataOptions(s.MetadataOptions),
			Context:                    clonePtr(s.Context),
		},
	}, nil
}

// idOrTagTerms reads a subnet or security group selector: aws-ids names them outright (one term
// per id); otherwise the tags form one term, all of which must match.
func idOrTagTerms[T any](field string, sel map[string]string, term func(tags map[string]string, id string) T) ([]T, error) {
	if len(sel) == 0 {
		return nil, fmt.Errorf("%s is empty", field)
	}
	if ids := splitList(sel[v1alpha1.SelectorIDs]); len(ids) > 0 {
		terms := make([]T, 0, len(ids))
		for _, id := range ids {
			terms = append(terms, term(nil, id))
		}
		return terms, nil
	}
	return []T{term(tagsOf(sel, v1alpha1.SelectorIDs), "")}, nil
}

// amiTerms: no selector means the family's latest published AMIs (an alias); aws::ids names
// AMIs outright; otherwise name and tags form a term per owner.
func amiTerms(familyPtr *string, sel map[string]string) (string, []ec2v1.AMISelectorTerm, error) {
	family := defaultAMIFamily
	if familyPtr != nil && *familyPtr != "" {
		family = *familyPtr
	}
	if len(sel) == 0 {
		alias := ec2v1.AliasOf(family, "latest")
		if alias == "" {
			return "", nil, fmt.Errorf("amiFamily %s needs an amiSelector", family)
		}
		return family, []ec2v1.AMISelectorTerm{{Alias: alias}}, nil
	}
	if family == "Ubuntu" {
		// v1 dropped the Ubuntu family; Ubuntu EKS AMIs bootstrap as AL2 does.
		family = ec2v1.AMIFamilyAL2
	}
	if ids := splitList(sel[v1alpha1.AMISelectorIDs]); len(ids) > 0 {
		terms := make([]ec2v1.AMISelectorTerm, 0, len(ids))
		for _, id := range ids {
			terms = append(terms, ec2v1.AMISelectorTerm{ID: id})
		}
		return family, terms, nil
	}
	base := ec2v1.AMISelectorTerm{
		Name: sel[v1alpha1.AMISelectorName],
		Tags: tagsOf(sel, v1alpha1.AMISelectorIDs, v1alpha1.AMISelectorName, v1alpha1.AMISelectorOwners),
	}
	owners := splitList(sel[v1alpha1.AMISelectorOwners])
	if base.Name == "" && base.Tags == nil {
		// Owners alone meant all their AMIs; v1 terms need a name or tags to match on.
		base.Name = "*"
	}
	if len(owners) == 0 {
		return family, []ec2v1.AMISelectorTerm{base}, nil
	}
	terms := make([]ec2v1.AMISelectorTerm, 0, len(owners))
	for _, owner := range owners {
		t := base
		t.Tags = maps.Clone(base.Tags)
		t.Owner = owner
		terms = append(terms, t)
	}
	return family, terms, nil
}

// metadataOptions fills what the template leaves out with v1alpha5's defaults.
func metadataOptions(in *v1alpha1.MetadataOptions) *ec2v1.MetadataOptions {
	out := &ec2v1.MetadataOptions{
		HTTPEndpoint:            ptrTo("enabled"),
		HTTPProtocolIPv6:        ptrTo("disabled"),
		HTTPPutResponseHopLimit: ptrTo(defaultHopLimit),
		HTTPTokens:              ptrTo("required"),
	}
	if in == nil {
		return out
	}
	if in.HTTPEndpoint != nil {
		out.HTTPEndpoint = clonePtr(in.HTTPEndpoint)
	}
	if in.HTTPProtocolIPv6 != nil {
		out.HTTPProtocolIPv6 = clonePtr(in.HTTPProtocolIPv6)
	}
	if in.HTTPPutResponseHopLimit != nil {
		out.HTTPPutResponseHopLimit = clonePtr(in.HTTPPutResponseHopLimit)
	}
	if in.HTTPTokens != nil {
		out.HTTPTokens = clonePtr(in.HTTPTokens)
	}
	return out
}

func blockDevices(in []*v1alpha1.BlockDeviceMapping) []*ec2v1.BlockDeviceMapping {
	if len(in) == 0 {
		return nil
	}
	out := make([]*ec2v1.BlockDeviceMapping, 0, len(in))
	for _, m := range in {
		if m == nil {
			continue
		}
		bdm := &ec2v1.BlockDeviceMapping{DeviceName: clonePtr(m.DeviceName)}
		if e := m.EBS; e != nil {
			bdm.EBS = &ec2v1.BlockDevice{
				DeleteOnTermination: clonePtr(e.DeleteOnTermination),
				Encrypted:           clonePtr(e.Encrypted),
				IOPS:                clonePtr(e.IOPS),
				KMSKeyID:            clonePtr(e.KMSKeyID),
				SnapshotID:          clonePtr(e.SnapshotID),
				Throughput:          clonePtr(e.Throughput),
				VolumeType:          clonePtr(e.VolumeType),
			}
			if e.VolumeSize != nil {
				q := e.VolumeSize.DeepCopy()
				bdm.EBS.VolumeSize = &q
			}
		}
		out = append(out, bdm)
	}
	return out
}

// tagsOf is the selector without its special keys; nil when nothing is left.
func tagsOf(sel map[string]string, special ...string) map[string]string {
	tags := maps.Clone(sel)
	for _, k := range special {
		delete(tags, k)
	}
	if len(tags) == 0 {
		return nil
	}
	return tags
}

// splitList splits a comma-separated list, trimming blanks, in order, without duplicates.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part != "" && !slices.Contains(out, part) {
			out = append(out, part)
		}
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// NodeVolumes is what an AWSNodeTemplate decides about its nodes' ephemeral storage, in v1
// terms: its AMI family (AL2 when unset, as v1alpha5) and its block device mappings.
func NodeVolumes(t *v1alpha1.AWSNodeTemplate) (amiFamily string, mappings []*ec2v1.BlockDeviceMapping) {
	amiFamily = defaultAMIFamily
	if t.Spec.AMIFamily != nil && *t.Spec.AMIFamily != "" {
		amiFamily = *t.Spec.AMIFamily
	}
	if amiFamily == "Ubuntu" {
		amiFamily = ec2v1.AMIFamilyAL2
	}
	return amiFamily, blockDevices(t.Spec.BlockDeviceMappings)
}
