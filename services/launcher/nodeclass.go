package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// selectorTerm selects EC2 resources by id, name or tags; terms are ORed, fields within a
// term ANDed, as in EC2NodeClass.
type selectorTerm struct {
	ID   string
	Name string
	Tags map[string]string
}

// filters turns a term into EC2 filters; "*" as a tag value means "the tag exists".
func (t selectorTerm) filters() []ec2types.Filter {
	var fs []ec2types.Filter
	keys := make([]string, 0, len(t.Tags))
	for k := range t.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := t.Tags[k]; v == "*" {
			fs = append(fs, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			fs = append(fs, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
		}
	}
	return fs
}

// resolver answers the node class's selector terms from EC2 (and SSM, for AMI aliases and
// ssmParameter terms), caching each answer for ttl.
type resolver struct {
	api EC2API
	ssm SSMAPI
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	at    time.Time
	value any
}

func newResolver(api EC2API, ssmAPI SSMAPI, ttl time.Duration, now func() time.Time) *resolver {
	return &resolver{api: api, ssm: ssmAPI, ttl: ttl, now: now, cache: map[string]cached{}}
}

func (r *resolver) remember(key string, load func() (any, error)) (any, error) {
	r.mu.Lock()
	c, ok := r.cache[key]
	r.mu.Unlock()
	if ok && r.now().Sub(c.at) < r.ttl {
		return c.value, nil
	}
	v, err := load()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.cache[key] = cached{at: r.now(), value: v}
	r.mu.Unlock()
	return v, nil
}

// subnets resolves subnet selector terms to every subnet they match, by zone and, within a
// zone, the most free addresses first (the order Karpenter prefers them in; bestPerZone picks
// the one a launch uses). The node class's status lists them all: an instance in any of them is
// in a subnet of its class (SubnetDrift).
func (r *resolver) subnets(ctx context.Context, terms []selectorTerm) ([]subnet, error) {
	v, err := r.remember(fmt.Sprintf("subnets/%v", terms), func() (any, error) {
		byID := map[string]subnet{}
		for _, t := range terms {
			in := &ec2.DescribeSubnetsInput{Filters: t.filters()}
			if t.ID != "" {
				in.SubnetIds = []string{t.ID}
			}
			p := ec2.NewDescribeSubnetsPaginator(r.api, in)
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					return nil, fmt.Errorf("describing subnets: %w", err)
				}
				for _, s := range page.Subnets {
					id := aws.ToString(s.SubnetId)
					byID[id] = subnet{ID: id, Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId),
						FreeIPs: aws.ToInt32(s.AvailableIpAddressCount)}
				}
			}
		}
		out := make([]subnet, 0, len(byID))
		for _, s := range byID {
			out = append(out, s)
		}
		sort.Slice(out, func(i, j int) bool {
			a, b := out[i], out[j]
			if a.Zone != b.Zone {
				return a.Zone < b.Zone
			}
			if a.FreeIPs != b.FreeIPs {
				return a.FreeIPs > b.FreeIPs
			}
			return a.ID < b.ID
		})
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	subnets := v.([]subnet)
	if len(subnets) == 0 {
		return nil, fmt.Errorf("no subnet matches the node class's subnet selector terms %v", terms)
	}
	return subnets, nil
}

// bestPerZone keeps the first subnet of each zone of subnets as resolver.subnets orders them:
// the one with the most free addresses, which a launch uses, as Karpenter picks.
func bestPerZone(subnets []subnet) []subnet {
	var out []subnet
	seen := map[string]bool{}
	for _, s := range subnets {
		if !seen[s.Zone] {
			seen[s.Zone] = true
			out = append(out, s)
		}
	}
	return out
}

// securityGroups resolves security-group selector terms to ids.
func (r *resolver) securityGroups(ctx context.Context, terms []selectorTerm) ([]string, error) {
	v, err := r.remember(fmt.Sprintf("sgs/%v", terms), func() (any, error) {
		ids := map[string]bool{}
		for _, t := range terms {
			in := &ec2.DescribeSecurityGroupsInput{Filters: t.filters()}
			if t.ID != "" {
				in.GroupIds = []string{t.ID}
			}
			if t.Name != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{t.Name}})
			}
			p := ec2.NewDescribeSecurityGroupsPaginator(r.api, in)
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					return nil, fmt.Errorf("describing security groups: %w", err)
				}
				for _, g := range page.SecurityGroups {
					ids[aws.ToString(g.GroupId)] = true
				}
			}
		}
		out := make([]string, 0, len(ids))
		for id := range ids {
			out = append(out, id)
		}
		sort.Strings(out)
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	sgs := v.([]string)
	if len(sgs) == 0 {
		return nil, fmt.Errorf("no security group matches the node class's selector terms %v", terms)
	}
	return sgs, nil
}
