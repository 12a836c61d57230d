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

// forget drops templates from what was seen, so the next ensure describes (and makes) them.
func (t *templates) forget(names ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range names {
		delete(t.seen, n)
	}
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

// collect deletes this cluster's launch templates nothing launches from again: those whose node
// class is gone (classes holds the names of those that exist), and, while their class lives,
// those of a configuration no longer used (an AMI replaced, labels, taints or kubelet settings
// changed: each makes a template of another name): made by the launcher (named
// fleetwright/<cluster>/...), at least minAge old, named by no live claim's launch record
// (inUse: the launches under way and the instances running from them). Without this every AMI release would leave templates behind until
// EC2's quota of them stopped every launch. It forgets what it deletes, so a configuration used
// again gets its template made again. The claims are read after the templates are listed, and
// a launch records its templates on its claim before it makes or uses them, so a launch under
// way in any replica keeps its own; one recorded between the two reads meets a template gone
// and makes it again (handler.go).
func (t *templates) collect(ctx context.Context, cluster string, classes map[string]bool, inUse func() map[string]bool, minAge time.Duration) (int, error) {
	p := ec2.NewDescribeLaunchTemplatesPaginator(t.api, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/cluster/" + cluster), Values: []string{"owned"}},
		{Name: aws.String("tag-key"), Values: []string{classTag}},
	}})
	var listed []ec2types.LaunchTemplate
	for page, err := range pages(ctx, p) {
		if err != nil {
			return 0, fmt.Errorf("describing launch templates: %w", err)
		}
		listed = append(listed, page.LaunchTemplates...)
	}
	used := inUse()
	now := t.now()
	deleted := 0
	for _, lt := range listed {
		name := aws.ToString(lt.LaunchTemplateName)
		if classes[templateClass(lt)] && !unused(name, cluster, lt.CreateTime, used, now, minAge) {
			continue
		}
		_, err := t.api.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)})
		if err != nil && apiErrorCode(err) != "InvalidLaunchTemplateName.NotFoundException" {
			return deleted, fmt.Errorf("deleting launch template %s: %w", name, err)
		}
		t.forget(name)
		deleted++
	}
	return deleted, nil
}

// templateMinAge is the youngest a template of a live class may be when collect deletes it,
// whatever the collection interval: the launch records that keep a template are read from the
// informer's cache, which can lag a launch's write of its record by more than a short interval
// on a busy machine, and a template that young is one a launch has just made to use.
const templateMinAge = 10 * time.Second

// unused says whether a template of a live class is one collect may delete.
func unused(name, cluster string, created *time.Time, used map[string]bool, now time.Time, minAge time.Duration) bool {
	return strings.HasPrefix(name, "fleetwright/"+cluster+"/") && !used[name] && created != nil && now.Sub(*created) >= max(minAge, templateMinAge)
}

// templateClass is the node class a template was made for (its classTag).
func templateClass(lt ec2types.LaunchTemplate) string {
	for _, tag := range lt.Tags {
		if aws.ToString(tag.Key) == classTag {
			return aws.ToString(tag.Value)
		}
	}
	return ""
}

// classTag names the node class a template was made for.
const classTag = "karpenter.k8s.aws/ec2nodeclass"
