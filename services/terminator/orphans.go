package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/rs/zerolog"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// orphans terminates running instances tagged as this cluster's and a node pool's (see owned)
// whose NodeClaim no longer exists (a claim deleted by hand before its finalizer was there, a
// crash between CreateFleet and recording the instance). An instance younger than grace is left alone: its claim may be
// about to record it.
type orphans struct {
	ec2     EC2API
	cache   *clusterstate.Cache
	cluster string
	grace   time.Duration
	log     zerolog.Logger
	metrics *metrics
	now     func() time.Time
}

func (o *orphans) collect(ctx context.Context) error {
	claims := map[string]bool{}
	for _, nc := range o.cache.Claims() {
		claims[nc.Name] = true
		if id := ec2v1.InstanceID(nc.Status.ProviderID); id != "" {
			claims[id] = true
		}
	}
	p := ec2.NewDescribeInstancesPaginator(o.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/cluster/" + o.cluster), Values: []string{"owned"}},
		{Name: aws.String("tag-key"), Values: []string{"karpenter.sh/nodeclaim"}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describing instances: %w", err)
		}
		for _, res := range page.Reservations {
			for _, inst := range res.Instances {
				id, claim := aws.ToString(inst.InstanceId), tag(inst.Tags, "karpenter.sh/nodeclaim")
				if !owned(inst.Tags, o.cluster) || claims[claim] || claims[id] || inst.LaunchTime != nil && o.now().Sub(*inst.LaunchTime) < o.grace {
					continue
				}
				log := o.log.With().Str("instance", id).Str("nodeclaim", claim).Logger()
				log.Warn().Msg("terminating instance no NodeClaim owns")
				if err := terminateInstance(ctx, o.ec2, o.cluster, id); err != nil {
					log.Error().Err(err).Msg("terminating orphaned instance")
					continue
				}
				o.metrics.orphans.Inc()
			}
		}
	}
	return nil
}

func tag(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}
