package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// budgetMargin is kept back from a delivery's handler deadline (--drain-slice) for settling
// the message.
const budgetMargin = 5 * time.Second

// handle is the executor's consumer: decode (done by bus), carry the intent out as far as
// this delivery allows, publish the TerminationResult once it is finished. A drain still
// going is returned as an error, so the intent comes back soon and the drain goes on.
func (e *executor) handle(ctx context.Context, in *terminationv1.TerminationIntent, d bus.Delivery) error {
	if in.GetIntentId() == "" || (in.GetNodeClaimName() == "" && in.GetNodeName() == "") {
		return bus.Permanent(errors.New("termination intent names no intent id, nodeclaim or node"))
	}
	budget := e.now().Add(25 * time.Second)
	if dl, ok := ctx.Deadline(); ok {
		budget = dl.Add(-budgetMargin)
	}
	log := e.log.With().Ctx(ctx).Str("intent", in.GetIntentId()).Str("nodeclaim", in.GetNodeClaimName()).
		Str("nodepool", in.GetNodePoolName()).Str("reason", reasonName(in.GetReason())).Uint64("attempt", d.Attempt).Logger()
	res, err := e.execute(ctx, in, d.Subject == e.prefix.Of(subject.TerminationsUrgent), budget, log)
	if errors.Is(err, errSuperseded) {
		e.metrics.outcomes.WithLabelValues(reasonName(in.GetReason()), "superseded").Inc()
		log.Info().Msg("resumed termination not needed: another intent is carrying it out")
		return nil
	}
	if errors.Is(err, errNotOwned) || errors.Is(err, errRefused) {
		return bus.Permanent(err) // dead-lettered, with the refusal, at once
	}
	if err != nil {
		return err
	}
	reason := reasonName(in.GetReason())
	e.metrics.outcomes.WithLabelValues(reason, outcomeName(res.Outcome)).Inc()
	if res.Outcome == terminationv1.TerminationOutcome_TERMINATION_OUTCOME_TERMINATED {
		e.metrics.terminated.WithLabelValues(reason, in.GetNodePoolName()).Inc()
		if res.Node != "" {
			e.metrics.drain.WithLabelValues(reason).Observe(res.Drain.Seconds())
		}
	}
	out := &terminationv1.TerminationResult{
		IntentId: in.GetIntentId(), NodeClaimName: in.GetNodeClaimName(), NodeName: res.Node, InstanceId: res.Instance,
		Reason: in.GetReason(), Outcome: res.Outcome, PodsEvicted: res.Evicted, EvictionRetries: res.Retries,
		Error: res.Why, CompleteTime: timestamppb.New(e.now()),
	}
	if res.Drain > 0 {
		out.DrainDuration = durationpb.New(res.Drain)
	}
	if err := e.bus.Publish(ctx, e.prefix.Of(subject.TerminationsResults), out, ""); err != nil {
		// The work is done; a redelivery finds everything gone and reports ALREADY_GONE.
		return err
	}
	return nil
}

// reasonName is the metric label of a reason: "empty", "expired", "interrupted", ...
func reasonName(r commonv1.TerminationReason) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "TERMINATION_REASON_"))
}

func outcomeName(o terminationv1.TerminationOutcome) string {
	return strings.ToLower(strings.TrimPrefix(o.String(), "TERMINATION_OUTCOME_"))
}
