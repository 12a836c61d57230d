package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/clock"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	interruptionv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/interruption/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// envelope is the EventBridge event an interruption-queue message carries as its body.
type envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       time.Time       `json:"time"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// notice is one parsed interruption event. Kind UNSPECIFIED means "not ours": acknowledged
// and ignored.
type notice struct {
	Kind        commonv1.InterruptionKind
	EventID     string
	Source      string
	DetailType  string
	Time        time.Time
	InstanceIDs []string
	State       string // state-change: the new state; spot: the instance-action
	HealthCode  string // scheduled change: the Health eventTypeCode
}

// eventKey selects a parser, as Karpenter matches events: source, detail-type and version.
type eventKey struct{ source, detailType, version string }

// parsers holds one parser per message kind.
var parsers = map[eventKey]func(envelope) (notice, error){
	{"aws.ec2", "EC2 Spot Instance Interruption Warning", "0"}: instanceEvent(commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION,
		func(d instanceDetail) string { return d.InstanceAction }),
	{"aws.ec2", "EC2 Instance Rebalance Recommendation", "0"}: instanceEvent(commonv1.InterruptionKind_INTERRUPTION_KIND_REBALANCE_RECOMMENDATION,
		func(instanceDetail) string { return "" }),
	{"aws.ec2", "EC2 Instance State-change Notification", "0"}: instanceEvent(commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE,
		func(d instanceDetail) string { return d.State }),
	{"aws.health", "AWS Health Event", "0"}: parseScheduledChange,
}

// parseNotice reads an SQS message body. A malformed body is an error; an event of a kind
// Fleetwright does not know parses to Kind UNSPECIFIED.
func parseNotice(body string) (notice, error) {
	var e envelope
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return notice{}, fmt.Errorf("decoding event: %w", err)
	}
	parse, ok := parsers[eventKey{e.Source, e.DetailType, e.Version}]
	if !ok {
		return notice{EventID: e.ID, Source: e.Source, DetailType: e.DetailType, Time: e.Time}, nil
	}
	n, err := parse(e)
	if err != nil {
		return notice{}, fmt.Errorf("decoding %q event %s: %w", e.DetailType, e.ID, err)
	}
	n.EventID, n.Source, n.DetailType, n.Time = e.ID, e.Source, e.DetailType, e.Time
	return n, nil
}

// instanceDetail is the detail of an EC2 event about one instance: a spot interruption warning
// (with the instance-action), a rebalance recommendation, a state change (with the new state).
type instanceDetail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
	State          string `json:"state"`
}

// instanceEvent parses an EC2 event about one instance to a notice of kind, whose State is
// what state picks from the detail.
func instanceEvent(kind commonv1.InterruptionKind, state func(instanceDetail) string) func(envelope) (notice, error) {
	return func(e envelope) (notice, error) {
		var d instanceDetail
		if err := decodeDetail(e, &d); err != nil {
			return notice{}, err
		}
		return notice{Kind: kind, InstanceIDs: []string{d.InstanceID}, State: state(d)}, nil
	}
}

// parseScheduledChange reads an AWS Health event; only EC2 scheduled changes are ours.
func parseScheduledChange(e envelope) (notice, error) {
	var d struct {
		Service           string `json:"service"`
		EventTypeCategory string `json:"eventTypeCategory"`
		EventTypeCode     string `json:"eventTypeCode"`
		AffectedEntities  []struct {
			EntityValue string `json:"entityValue"`
		} `json:"affectedEntities"`
	}
	if err := decodeDetail(e, &d); err != nil {
		return notice{}, err
	}
	if d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" {
		return notice{}, nil
	}
	n := notice{Kind: commonv1.InterruptionKind_INTERRUPTION_KIND_SCHEDULED_CHANGE, HealthCode: d.EventTypeCode}
	for _, a := range d.AffectedEntities {
		if a.EntityValue != "" {
			n.InstanceIDs = append(n.InstanceIDs, a.EntityValue)
		}
	}
	if len(n.InstanceIDs) == 0 {
		return notice{}, errors.New("no affected entities")
	}
	return n, nil
}

func decodeDetail(e envelope, into any) error {
	if err := json.Unmarshal(e.Detail, into); err != nil {
		return fmt.Errorf("decoding detail: %w", err)
	}
	return nil
}

// kindName is the metric label of a kind: the enum name, lower-cased, without its prefix.
func kindName(k commonv1.InterruptionKind) string {
	if k == commonv1.InterruptionKind_INTERRUPTION_KIND_UNSPECIFIED {
		return "unknown"
	}
	return strings.ToLower(strings.TrimPrefix(k.String(), "INTERRUPTION_KIND_"))
}

// kindSubject is the last token of <prefix>.interruptions.<kind>.
func kindSubject(k commonv1.InterruptionKind) string {
	switch k {
	case commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION:
		return subject.InterruptionSpot
	case commonv1.InterruptionKind_INTERRUPTION_KIND_SCHEDULED_CHANGE:
		return subject.InterruptionScheduled
	case commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE:
		return subject.InterruptionStateChange
	default:
		return subject.InterruptionRebalance
	}
}

// spotNotice is how long AWS gives a spot instance after its interruption warning.
const spotNotice = 2 * time.Minute

// interruptionIntent is the decision an event leads to for one node. The grace period of a
// spot interruption is what is left, at now, of the two minutes AWS gives from the warning's
// event_time (its receive_time if the event has none), and no more than the NodeClaim's
// terminationGracePeriod: a warning read late, or an event handled again, does not get a fresh
// two minutes. request_time + grace_period is the instant AWS reclaims the instance.
func interruptionIntent(ev *interruptionv1.InterruptionEvent, c claimRef, now time.Time) *terminationv1.TerminationIntent {
	in := &terminationv1.TerminationIntent{
		IntentId: c.UID + "/interrupted", NodeClaimName: c.Name, NodeName: c.NodeName, InstanceId: c.InstanceID,
		ProviderId: c.ProviderID, NodePoolName: c.Pool, Reason: commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED,
		RequestTime: timestamppb.New(now), InterruptionEventId: ev.GetEventId(),
		Why: fmt.Sprintf("%s %s for %s", ev.GetDetailType(), ev.GetEventId(), c.InstanceID),
	}
	if ev.GetState() != "" {
		in.Why += " (" + ev.GetState() + ")"
	}
	if c.Grace != nil {
		in.GracePeriod = durationpb.New(*c.Grace)
	}
	if ev.GetKind() == commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION {
		warned, ok := warningTime(ev)
		if !ok {
			warned = now // published by hand without times: it cannot be older than now
		}
		left := min(warned.Add(spotNotice).Sub(now), spotNotice) // a clock ahead of ours gives no more than the notice
		left = max(left, 0)
		if c.Grace == nil || left < *c.Grace {
			in.GracePeriod = durationpb.New(left)
		}
	}
	return in
}

// warningTime is when AWS sent the warning: the event's time, else when the poller received it.
func warningTime(ev *interruptionv1.InterruptionEvent) (time.Time, bool) {
	for _, t := range []*timestamppb.Timestamp{ev.GetEventTime(), ev.GetReceiveTime()} {
		if t != nil && t.IsValid() && !t.AsTime().IsZero() && t.AsTime().Unix() > 0 {
			return t.AsTime(), true
		}
	}
	return time.Time{}, false
}

// publisher is the durable publish the poller and the decision loop need; *bus.Conn
// satisfies it (Publish returns after JetStream acknowledged the message).
type publisher interface {
	Publish(ctx context.Context, subj string, msg proto.Message, msgID string) error
}

// deadLetterer parks a message that is not a bus message; *bus.Conn satisfies it.
type deadLetterer interface {
	DeadLetter(ctx context.Context, origin string, data []byte, cause error, id string) error
}

// poller reads the interruption queue and turns each message into InterruptionEvents on
// <prefix>.interruptions.<kind>; its consumer (handleEvent) turns the events of the kinds that
// call for it into TerminationIntents. Several replicas may poll one queue: a message is
// invisible to the others while one handles it, and the ids make a duplicate harmless.
type poller struct {
	sqs      SQSAPI
	queue    string // name or URL
	wait     time.Duration
	bus      publisher
	dead     deadLetterer // where unreadable queue messages are parked; nil: only counted
	prefix   subject.Prefix
	claims   func(instanceID string) (claimRef, bool)
	log      zerolog.Logger
	metrics  *metrics
	now      func() time.Time
	queueURL string
}

// resolveQueue turns a queue name into its URL.
func (p *poller) resolveQueue(ctx context.Context) error {
	if strings.HasPrefix(p.queue, "http://") || strings.HasPrefix(p.queue, "https://") {
		p.queueURL = p.queue
		return nil
	}
	out, err := p.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(p.queue)})
	if err != nil {
		return fmt.Errorf("finding interruption queue %s: %w", p.queue, err)
	}
	p.queueURL = aws.ToString(out.QueueUrl)
	return nil
}

// run long-polls the queue until ctx ends.
func (p *poller) run(ctx context.Context) error {
	for p.queueURL == "" {
		err := p.resolveQueue(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		p.log.Warn().Err(err).Msg("interruption queue not reachable; retrying")
		clock.Sleep(ctx, 5*time.Second)
	}
	p.log.Info().Str("queue", p.queueURL).Msg("polling interruption queue")
	for ctx.Err() == nil {
		start := time.Now() // the long poll included, as in Karpenter, whose receive waits too
		out, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(p.queueURL), MaxNumberOfMessages: 10, VisibilityTimeout: 30,
			WaitTimeSeconds: int32(p.wait / time.Second), MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"SentTimestamp"},
		})
		if err != nil {
			if ctx.Err() == nil {
				p.metrics.karp.reconciles.Observe(karpmetrics.ControllerInterruption, start, err)
				p.log.Warn().Err(err).Msg("receiving interruption messages")
				clock.Sleep(ctx, 2*time.Second)
			}
			continue
		}
		for _, m := range out.Messages {
			p.handle(ctx, m)
		}
		// Karpenter's interruption controller is one reconcile per receive, its messages
		// handled within it.
		p.metrics.karp.reconciles.Observe(karpmetrics.ControllerInterruption, start, nil)
	}
	return nil
}

// handle publishes the events one message carries and deletes it once they are durable. If a
// publish fails the message stays, and comes back after its visibility timeout.
func (p *poller) handle(ctx context.Context, m sqstypes.Message) {
	received := p.now()
	// The trace of an interruption starts here and follows its intent through the drain.
	ctx, span := tracer.Start(ctx, "terminator.interruption", trace.WithAttributes(attribute.String("fleetwright.sqs_message_id", aws.ToString(m.MessageId))))
	defer span.End()
	log := p.log.With().Ctx(ctx).Str("sqs_message", aws.ToString(m.MessageId)).Logger()
	n, err := parseNotice(aws.ToString(m.Body))
	span.SetAttributes(attribute.String("fleetwright.interruption_kind", kindName(n.Kind)), attribute.StringSlice("fleetwright.instance_ids", n.InstanceIDs))
	switch {
	case err != nil:
		p.metrics.interruptions.WithLabelValues("malformed").Inc()
		log.Warn().Err(err).Msg("dead-lettering malformed interruption message")
		if p.dead != nil {
			// Parked for a human before it is deleted; if that fails the message stays queued
			// and comes back after its visibility timeout. One dead letter per queue message.
			if derr := p.dead.DeadLetter(ctx, p.prefix.Of(subject.SQSInterruptions), []byte(aws.ToString(m.Body)),
				fmt.Errorf("interruption queue %s: %w", p.queueURL, err), "dl-sqs-"+aws.ToString(m.MessageId)); derr != nil {
				log.Error().Err(derr).Msg("dead-lettering malformed interruption message; it stays queued")
				return
			}
		}
	case n.Kind == commonv1.InterruptionKind_INTERRUPTION_KIND_UNSPECIFIED:
		p.metrics.interruptions.WithLabelValues("unknown").Inc()
		p.metrics.karp.received.WithLabelValues(karpmetrics.MessageNoOp).Inc()
		log.Info().Str("source", n.Source).Str("detail_type", n.DetailType).Msg("ignoring interruption message of unknown kind")
	default:
		p.metrics.interruptions.WithLabelValues(kindName(n.Kind)).Inc()
		p.metrics.karp.received.WithLabelValues(messageType(n.Kind, n.State)).Inc()
		if err := p.publish(ctx, n, aws.ToString(m.MessageId), received, log); err != nil {
			log.Error().Err(err).Msg("publishing interruption; the message stays queued")
			return
		}
		if !n.Time.IsZero() {
			p.metrics.karp.queueDuration.Observe(p.now().Sub(n.Time).Seconds()) // from the event, as Karpenter's StartTime
		}
	}
	if _, err := p.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(p.queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		log.Warn().Err(err).Msg("deleting interruption message")
		return
	}
	p.metrics.karp.deleted.Inc()
}

func (p *poller) publish(ctx context.Context, n notice, messageID string, received time.Time, log zerolog.Logger) error {
	for _, id := range n.InstanceIDs {
		c, _ := p.claims(id)
		ev := &interruptionv1.InterruptionEvent{Kind: n.Kind, InstanceId: id, SqsMessageId: messageID, EventId: n.EventID,
			EventTime: timestamppb.New(n.Time), Source: n.Source, DetailType: n.DetailType, State: n.State,
			HealthEventTypeCode: n.HealthCode, NodeName: c.NodeName, NodeClaimName: c.Name, ReceiveTime: timestamppb.New(received)}
		if err := p.bus.Publish(ctx, p.prefix.Interruptions(kindSubject(n.Kind)), ev, n.EventID+"/"+id); err != nil {
			return fmt.Errorf("publishing interruption event: %w", err)
		}
		log.Debug().Str("kind", kindName(n.Kind)).Str("instance", id).Str("event", n.EventID).Msg("published interruption event")
	}
	return nil
}

// handleEvent is the consumer of <prefix>.interruptions.*: an event of a kind that acts on a
// known instance becomes a TerminationIntent for its NodeClaim (one id per NodeClaim, so
// JetStream drops a repeat); every other event is only recorded.
func (p *poller) handleEvent(ctx context.Context, ev *interruptionv1.InterruptionEvent, _ bus.Delivery) error {
	c, known := p.claims(ev.GetInstanceId())
	l := p.log.With().Ctx(ctx).Str("kind", kindName(ev.GetKind())).Str("instance", ev.GetInstanceId()).Str("event", ev.GetEventId()).Logger()
	switch {
	case !known:
		l.Info().Msg("interruption for an instance that is not one of our nodes; recorded")
	case !disruption.Drains(ev):
		l.Info().Str("node", c.NodeName).Str("state", ev.GetState()).Msg("recorded interruption event; no action")
	default:
		in := interruptionIntent(ev, c, p.now())
		if err := p.bus.Publish(ctx, intentSubject(p.prefix, in), in, in.GetIntentId()); err != nil {
			return fmt.Errorf("publishing termination intent: %w", err)
		}
		p.metrics.decisions.WithLabelValues(reasonName(in.GetReason())).Inc()
		p.metrics.karp.interrupted(c, messageType(ev.GetKind(), ev.GetState()))
		l.Info().Str("node", c.NodeName).Str("nodeclaim", c.Name).Msg("initiating termination for interruption")
	}
	return nil
}
