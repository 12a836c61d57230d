package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
)

// collectOrphans terminates running instances tagged as this cluster's whose NodeClaim no
// longer exists (a claim deleted by hand, a crash between CreateFleet and recording it). An
// instance younger than the grace period is left alone: its claim may be about to record it.
func (r *registrar) collectOrphans(ctx context.Context) error {
	claims, err := r.claims.List(ctx)
	if err != nil {
		return fmt.Errorf("listing nodeclaims: %w", err)
	}
	owned := map[string]bool{}
	for _, c := range claims {
		owned[c.Name] = true
		if c.ProviderID != "" {
			owned["id:"+ec2v1.InstanceID(c.ProviderID)] = true
		}
	}
	p := ec2.NewDescribeInstancesPaginator(r.api, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/cluster/" + r.cfg.ClusterName), Values: []string{"owned"}},
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
				id := aws.ToString(inst.InstanceId)
				claim := tagValue(inst.Tags, "karpenter.sh/nodeclaim")
				if owned[claim] || owned["id:"+id] {
					continue
				}
				if inst.LaunchTime != nil && r.now().Sub(*inst.LaunchTime) < r.cfg.GCGrace {
					continue
				}
				r.log.Warn().Str("instance", id).Str("nodeclaim", claim).Msg("terminating instance no NodeClaim owns")
				if err := terminate(ctx, r.api, id); err != nil {
					r.log.Error().Err(err).Str("instance", id).Msg("terminating orphaned instance")
					continue
				}
				r.metrics.gc.WithLabelValues("orphaned").Inc()
			}
		}
	}
	return nil
}

func terminate(ctx context.Context, api EC2API, id string) error {
	_, err := api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil && apiErrorCode(err) != "InvalidInstanceID.NotFound" {
		return fmt.Errorf("terminating %s: %w", id, err)
	}
	return nil
}

func tagValue(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}
