package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// orphans terminates running instances tagged as this cluster's and a node pool's (see owned)
// that no NodeClaim owns: their claim no longer exists (a claim deleted by hand before its
// finalizer was there, a crash between CreateFleet and recording the instance), or it exists
// and records another instance (a second launch for one claim: a redelivered intent whose
// lookup EC2's eventually consistent DescribeInstances did not yet answer). An instance younger
// than grace is left alone: its claim may be about to record it.
//
// As Karpenter's garbage collection, it lists the instances first and reads the claims and
// nodes after, so a claim that records its instance while the list is under way is seen; and it
// never ends an instance that has a Node, unless that Node never registered with a claim (it
// still carries karpenter.sh/unregistered, so nothing but DaemonSets can run there): a node
// with pods is drained through its claim, never cut off here.
type orphans struct {
	ec2     EC2API
	cache   *clusterstate.Cache
	cluster string
	grace   time.Duration
	log     zerolog.Logger
	metrics *metrics
	now     func() time.Time
	spared  map[string]bool // instances kept for their Node, logged once
}

func (o *orphans) collect(ctx context.Context) error {
	var candidates []ec2types.Instance
	p := ec2.NewDescribeInstancesPaginator(o.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/cluster/" + o.cluster), Values: []string{"owned"}},
		{Name: aws.String("tag-key"), Values: []string{ec2v1.TagNodeClaim}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describing instances: %w", err)
		}
		for _, res := range page.Reservations {
			for _, inst := range res.Instances {
				if owned(inst.Tags, o.cluster) && (inst.LaunchTime == nil || o.now().Sub(*inst.LaunchTime) >= o.grace) {
					candidates = append(candidates, inst)
				}
			}
		}
	}
	if len(candidates) == 0 {
		o.metrics.orphansKept.Set(0)
		return nil
	}
	// Read after the list: what is recorded by now is seen.
	byName, recorded := map[string]*karpv1.NodeClaim{}, map[string]bool{}
	for _, nc := range o.cache.Claims() {
		byName[nc.Name] = nc
		if id := ec2v1.InstanceID(nc.Status.ProviderID); id != "" {
			recorded[id] = true
		}
	}
	nodeOf := map[string]*corev1.Node{}
	for _, n := range o.cache.AllNodes() {
		if id := ec2v1.InstanceID(n.Spec.ProviderID); id != "" {
			nodeOf[id] = n
		}
	}
	kept := 0
	for _, inst := range candidates {
		id, claim := aws.ToString(inst.InstanceId), tag(inst.Tags, ec2v1.TagNodeClaim)
		why := orphaned(id, byName[claim], recorded[id])
		if why == "" {
			continue
		}
		log := o.log.With().Str("instance", id).Str("nodeclaim", claim).Str("why", why).Logger()
		if n := nodeOf[id]; n != nil && !unregistered(n) {
			kept++
			if !o.spared[id] {
				if o.spared == nil || len(o.spared) > 10000 {
					o.spared = map[string]bool{}
				}
				o.spared[id] = true
				log.Warn().Str("node", n.Name).Msg("not terminating an instance no NodeClaim owns: it has a registered Node (delete the Node to end it)")
			}
			continue
		}
		log.Warn().Msg("terminating instance no NodeClaim owns")
		if err := terminateInstance(ctx, o.ec2, o.cluster, id); err != nil {
			log.Error().Err(err).Msg("terminating orphaned instance")
			continue
		}
		o.metrics.orphans.Inc()
	}
	o.metrics.orphansKept.Set(float64(kept))
	return nil
}

// orphaned says why an instance tagged for a claim belongs to no claim, or "" if it does (or
// may yet): recorded says a claim records the instance; nc is the claim its tag names.
func orphaned(id string, nc *karpv1.NodeClaim, recorded bool) string {
	switch {
	case recorded:
		return ""
	case nc == nil:
		return "its NodeClaim does not exist"
	case nc.Status.ProviderID == "":
		return "" // launched, not yet recorded: the launcher adopts it
	default:
		return "its NodeClaim runs instance " + ec2v1.InstanceID(nc.Status.ProviderID) + ": this one is a second launch for it"
	}
}

// unregistered says whether a Node still waits for its NodeClaim: it has the taint every node
// Fleetwright launches registers with, lifted only when the node is linked to its claim.
func unregistered(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.UnregisteredTaintKey })
}

func tag(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}
