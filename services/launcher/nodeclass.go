package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
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
	for _, k := range slices.Sorted(maps.Keys(t.Tags)) {
		if v := t.Tags[k]; v == "*" {
			fs = append(fs, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			fs = append(fs, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
		}
	}
	return fs
}

// ids is the term's id as a Describe call takes ids; none without one.
func (t selectorTerm) ids() []string {
	if t.ID == "" {
		return nil
	}
	return []string{t.ID}
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

// remember answers key from the cache while its answer is younger than ttl, else with load,
// whose answer it keeps (an error it does not).
func remember[T any](r *resolver, key string, load func() (T, error)) (T, error) {
	r.mu.Lock()
	c, ok := r.cache[key]
	r.mu.Unlock()
	if ok && r.now().Sub(c.at) < r.ttl {
		return c.value.(T), nil
	}
	v, err := load()
	if err != nil {
		return v, err
	}
	r.mu.Lock()
	r.cache[key] = cached{at: r.now(), value: v}
	r.mu.Unlock()
	return v, nil
}

// resolveTerms answers selector terms as remember does, under kind/terms; an answer of nothing
// is the error none (followed by the terms).
func resolveTerms[T any](r *resolver, kind string, terms []selectorTerm, none string, load func() ([]T, error)) ([]T, error) {
	found, err := remember(r, fmt.Sprintf("%s/%v", kind, terms), load)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("%s %v", none, terms)
	}
	return found, nil
}

// subnets resolves subnet selector terms to every subnet they match, by zone and, within a
// zone, the most free addresses first (the order Karpenter prefers them in; bestPerZone picks
// the one a launch uses). The node class's status lists them all: an instance in any of them is
// in a subnet of its class (SubnetDrift).
func (r *resolver) subnets(ctx context.Context, terms []selectorTerm) ([]subnet, error) {
	return resolveTerms(r, "subnets", terms, "no subnet matches the node class's subnet selector terms", func() ([]subnet, error) {
		byID := map[string]subnet{}
		for _, t := range terms {
			in := &ec2.DescribeSubnetsInput{Filters: t.filters(), SubnetIds: t.ids()}
			for page, err := range pages(ctx, ec2.NewDescribeSubnetsPaginator(r.api, in)) {
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
		return slices.SortedFunc(maps.Values(byID), func(a, b subnet) int {
			return cmp.Or(cmp.Compare(a.Zone, b.Zone), cmp.Compare(b.FreeIPs, a.FreeIPs), cmp.Compare(a.ID, b.ID))
		}), nil
	})
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
	return resolveTerms(r, "sgs", terms, "no security group matches the node class's selector terms", func() ([]string, error) {
		ids := map[string]bool{}
		for _, t := range terms {
			in := &ec2.DescribeSecurityGroupsInput{Filters: t.filters(), GroupIds: t.ids()}
			if t.Name != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{t.Name}})
			}
			for page, err := range pages(ctx, ec2.NewDescribeSecurityGroupsPaginator(r.api, in)) {
				if err != nil {
					return nil, fmt.Errorf("describing security groups: %w", err)
				}
				for _, g := range page.SecurityGroups {
					ids[aws.ToString(g.GroupId)] = true
				}
			}
		}
		return slices.Sorted(maps.Keys(ids)), nil
	})
}
