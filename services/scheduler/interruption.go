package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/offerings"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	interruptionv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/interruption/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// interruptedTTL is how long an interrupted spot offering is avoided, as an offering that
// failed with insufficient capacity is.
const interruptedTTL = 3 * time.Minute

// interruptionsDurable is the leader's consumer of interruption events, beside the terminator's.
const interruptionsDurable = "scheduler-interruptions"

// onInterruption asks for replacement capacity for the pods of a node an interruption drains,
// as soon as the event arrives: the terminator drains the node on the same event, and the 2
// minutes of a spot warning are too short to wait for the evicted pods to go pending, be batched
// and planned. The interrupted spot offering is published as unavailable first, so neither the
// replacement nor anything else lands in the pool AWS is reclaiming. The replacements carry
// disruption.ReplacesAnnotation (the terminator does not empty them while the node they replace
// is there) and fixed names (a redelivered event creates nothing twice); the pods recreated by
// their controllers are planned onto them by the next batch.
func (s *scheduler) onInterruption(ctx context.Context, ev *interruptionv1.InterruptionEvent, _ bus.Delivery) error {
	if !disruption.Drains(ev) {
		return nil
	}
	nc, ok := s.cluster.ClaimOfInstance(ev.GetInstanceId())
	if !ok {
		return nil // not one of ours (or gone already)
	}
	ctx, span := tracer.Start(ctx, "scheduler.interruption")
	defer span.End()
	span.SetAttributes(attribute.String("fleetwright.nodeclaim", nc.Name), attribute.String("fleetwright.instance_id", ev.GetInstanceId()),
		attribute.String("fleetwright.event_id", ev.GetEventId()))
	log := s.rt.Log.With().Ctx(ctx).Str("nodeclaim", nc.Name).Str("instance", ev.GetInstanceId()).Str("event", ev.GetEventId()).Logger()
	if ev.GetKind() == commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION {
		s.interruptedOffering(ctx, nc, ev, log)
	}
	st, err := s.readDisruption()
	if err != nil {
		return err
	}
	if nc, ok = st.claims[nc.Name]; !ok {
		return nil
	}
	pods, others := s.without(st, nc)
	if len(pods) == 0 {
		return nil
	}
	plan, err := scheduling.Solve(s.input(st.v, others, pods))
	if err != nil {
		return fmt.Errorf("planning replacement capacity for interrupted nodeclaim %s: %w", nc.Name, err)
	}
	for _, u := range plan.Unschedulable {
		log.Warn().Str("pod", podName(pods, u.PodUID)).Str("why", u.Reason).Msg("no replacement capacity for a pod of the interrupted node")
	}
	if len(plan.NodeClaims) == 0 {
		log.Info().Int("pods", len(pods)).Msg("the interrupted node's pods fit on existing capacity")
		return nil
	}
	var names []string
	for i, c := range plan.NodeClaims {
		name := replacementName(c.NodePool, []*karpv1.NodeClaim{nc}, i)
		if err := s.launchReplacement(ctx, st, c, name, []string{nc.Name}, createdProvisioned); err != nil {
			return err
		}
		names = append(names, name)
	}
	msg := fmt.Sprintf("interrupted (%s %s): launching %v at once for its %d pod(s)", ev.GetDetailType(), ev.GetEventId(), names, len(pods))
	s.once("interruption/"+string(nc.UID), func() {
		log.Info().Strs("replacements", names).Int("pods", len(pods)).Msg("requested replacement capacity for an interrupted node")
		s.tell(nc, nc.Status.NodeName, corev1.EventTypeNormal, "DisruptionLaunching", msg)
	})
	span.SetAttributes(attribute.StringSlice("fleetwright.replacements", names))
	return nil
}

// interruptedOffering publishes the interrupted node's spot offering as unavailable.
func (s *scheduler) interruptedOffering(ctx context.Context, nc *karpv1.NodeClaim, ev *interruptionv1.InterruptionEvent, log zerolog.Logger) {
	node, ok := s.cluster.Node(nc.Status.NodeName)
	if !ok {
		return
	}
	typ, zone := node.Labels[scheduling.LabelInstanceType], node.Labels[scheduling.LabelZone]
	if typ == "" || zone == "" || node.Labels[scheduling.LabelCapacityType] != scheduling.CapacityTypeSpot {
		return
	}
	now := s.now()
	msg := &launchv1.OfferingUnavailable{InstanceType: typ, Zone: zone, CapacityType: offerings.CapacityType(scheduling.CapacityTypeSpot),
		Reason: "SpotInterruption", ObserveTime: timestamppb.New(now), Ttl: durationpb.New(interruptedTTL),
		ExpireTime: timestamppb.New(now.Add(interruptedTTL)), NodeClaimName: nc.Name}
	s.unavailable.Add(msg) // at once for this plan; the launchers learn it from the bus
	id := "interrupted/" + ev.GetEventId() + "/" + ev.GetInstanceId()
	wctx, done, err := s.fence(ctx, "offering_unavailable")
	if err != nil {
		return
	}
	defer done()
	if err := s.rt.Bus.Publish(wctx, s.rt.Bus.Prefix().Of(subject.OfferingsUnavailable), msg, id); err != nil {
		log.Warn().Err(err).Msg("publishing the interrupted offering as unavailable")
		return
	}
	log.Info().Str("offering", "spot/"+typ+"/"+zone).Dur("for", interruptedTTL).Msg("marked the interrupted offering unavailable")
}
