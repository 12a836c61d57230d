package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
)

// templateSpec is one distinct launch configuration. Everything in it goes into the name's
// hash, so a change (new AMI, other labels) makes a new template rather than editing one that
// running fleets use.
type templateSpec struct {
	ClusterName      string
	NodeClass        string
	ImageID          string
	SecurityGroupIDs []string
	UserData         string // rendered, not encoded
	InstanceProfile  string
	Tags             map[string]string
	// BlockDevices are the node class's volumes (or its AMI family's default).
	BlockDevices []blockDevice
	Metadata     metadataOptions
	PublicIP     *bool // AssociatePublicIpAddress on the primary interface; nil: the subnet's setting
	Monitoring   bool  // detailed monitoring
}

// metadataOptions are the class's instance metadata settings, defaults filled in.
type metadataOptions struct {
	Endpoint string // enabled or disabled
	IPv6     string // enabled or disabled
	HopLimit int64
	Tokens   string // required or optional
}

// metadataOf fills in what the class leaves out with the CRD's defaults (IMDSv2 only, hop
// limit 1): a class the API server defaulted and a translated AWSNodeTemplate launch alike.
func metadataOf(m *ec2v1.MetadataOptions) metadataOptions {
	out := metadataOptions{Endpoint: "enabled", IPv6: "disabled", HopLimit: 1, Tokens: "required"}
	if m == nil {
		return out
	}
	if m.HTTPEndpoint != nil {
		out.Endpoint = *m.HTTPEndpoint
	}
	if m.HTTPProtocolIPv6 != nil {
		out.IPv6 = *m.HTTPProtocolIPv6
	}
	if m.HTTPPutResponseHopLimit != nil {
		out.HopLimit = *m.HTTPPutResponseHopLimit
	}
	if m.HTTPTokens != nil {
		out.Tokens = *m.HTTPTokens
	}
	return out
}

func (s templateSpec) name() string {
	h := sha256.New()
	sgs := append([]string(nil), s.SecurityGroupIDs...)
	sort.Strings(sgs)
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%s", s.ClusterName, s.NodeClass, s.ImageID, strings.Join(sgs, ","), s.UserData, s.InstanceProfile)
	for _, k := range slices.Sorted(maps.Keys(s.Tags)) {
		fmt.Fprintf(h, "\x00%s=%s", k, s.Tags[k])
	}
	for _, d := range s.BlockDevices {
		fmt.Fprintf(h, "\x00bdm=%s", d)
	}
	publicIP := "subnet"
	if s.PublicIP != nil {
		publicIP = fmt.Sprint(*s.PublicIP)
	}
	fmt.Fprintf(h, "\x00metadata=%+v\x00public-ip=%s\x00monitoring=%t", s.Metadata, publicIP, s.Monitoring)
	return "fleetwright/" + s.ClusterName + "/" + hex.EncodeToString(h.Sum(nil))[:20]
}

// templates creates launch templates on first use and remembers the ones it has seen for a
// while (ttl), so a busy launcher describes each one rarely; it forgets them after that, so the
// names of configurations no longer launched (an AMI replaced, a class changed) do not pile up.
type templates struct {
	api EC2API
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time
}

func newTemplates(api EC2API, ttl time.Duration, now func() time.Time) *templates {
	return &templates{api: api, ttl: ttl, now: now, seen: map[string]time.Time{}}
}

// ensure returns the name of the template for spec, creating it if EC2 does not have it.
// Two launchers racing to create the same template both succeed.
func (t *templates) ensure(ctx context.Context, spec templateSpec) (string, error) {
	name := spec.name()
	t.mu.Lock()
	at, ok := t.seen[name]
	t.mu.Unlock()
	if ok && t.now().Sub(at) < t.ttl {
		return name, nil
	}
	out, err := t.api.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	switch {
	case err == nil && len(out.LaunchTemplates) > 0:
	case err == nil || apiErrorCode(err) == "InvalidLaunchTemplateName.NotFoundException":
		if err := t.create(ctx, name, spec); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("describing launch template %s: %w", name, err)
	}
	now := t.now()
	t.mu.Lock()
	for n, at := range t.seen { // bounded: what is past its ttl would be described again anyway
		if now.Sub(at) >= t.ttl {
			delete(t.seen, n)
		}
	}
	t.seen[name] = now
	t.mu.Unlock()
	return name, nil
}

func (t *templates) create(ctx context.Context, name string, spec templateSpec) error {
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:          aws.String(spec.ImageID),
		SecurityGroupIds: spec.SecurityGroupIDs,
		UserData:         aws.String(base64.StdEncoding.EncodeToString([]byte(spec.UserData))),
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(spec.Metadata.Endpoint),
			HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(spec.Metadata.IPv6),
			HttpPutResponseHopLimit: aws.Int32(int32(spec.Metadata.HopLimit)),
			HttpTokens:              ec2types.LaunchTemplateHttpTokensState(spec.Metadata.Tokens),
		},
		Monitoring: &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(spec.Monitoring)},
	}
	if spec.PublicIP != nil {
		// As Karpenter: the setting lives on the primary interface, and the security groups move
		// there with it (EC2 refuses groups on both the instance and an interface).
		data.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
			DeviceIndex: aws.Int32(0), AssociatePublicIpAddress: aws.Bool(*spec.PublicIP), Groups: spec.SecurityGroupIDs,
		}}
		data.SecurityGroupIds = nil
	}
	if len(spec.BlockDevices) > 0 {
		data.BlockDeviceMappings = blockDeviceRequest(spec.BlockDevices)
	}
	if spec.InstanceProfile != "" {
		data.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(spec.InstanceProfile)}
	}
	_, err := t.api.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: data,
		TagSpecifications:  tagSpecs(spec.Tags, ec2types.ResourceTypeLaunchTemplate),
	})
	if err != nil && apiErrorCode(err) != "InvalidLaunchTemplateName.AlreadyExistsException" {
		return fmt.Errorf("creating launch template %s: %w", name, err)
	}
	return nil
}

// collect deletes this cluster's launch templates whose node class is gone (classes holds the
// names of those that exist): nothing launches from them again. It forgets them too, so a class
// made again under the same name gets its template made again.
func (t *templates) collect(ctx context.Context, cluster string, classes map[string]bool) (int, error) {
	p := ec2.NewDescribeLaunchTemplatesPaginator(t.api, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/cluster/" + cluster), Values: []string{"owned"}},
		{Name: aws.String("tag-key"), Values: []string{classTag}},
	}})
	deleted := 0
	for page, err := range pages(ctx, p) {
		if err != nil {
			return deleted, fmt.Errorf("describing launch templates: %w", err)
		}
		for _, lt := range page.LaunchTemplates {
			class := ""
			for _, tag := range lt.Tags {
				if aws.ToString(tag.Key) == classTag {
					class = aws.ToString(tag.Value)
				}
			}
			if classes[class] {
				continue
			}
			name := aws.ToString(lt.LaunchTemplateName)
			_, err := t.api.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)})
			if err != nil && apiErrorCode(err) != "InvalidLaunchTemplateName.NotFoundException" {
				return deleted, fmt.Errorf("deleting launch template %s: %w", name, err)
			}
			t.mu.Lock()
			delete(t.seen, name)
			t.mu.Unlock()
			deleted++
		}
	}
	return deleted, nil
}

// classTag names the node class a template was made for.
const classTag = "karpenter.k8s.aws/ec2nodeclass"
