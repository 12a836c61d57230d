package main

import (
	"context"
	"fmt"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
	"github.com/fleetwright/fleetwright/pkg/sdkhttp"
	"github.com/fleetwright/fleetwright/pkg/service"
	"github.com/fleetwright/fleetwright/pkg/subject"
	"github.com/fleetwright/fleetwright/pkg/telemetry"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// serve wires the AWS clients and the caches to rt and terminates until ctx ends.
func serve(ctx context.Context, cfg config, rt *service.Runtime) error {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.Region))
	if err != nil {
		return fmt.Errorf("loading AWS configuration: %w", err)
	}
	// Wrapped once configured: the configuration sets up the SDK's own client (a custom CA
	// bundle needs it unwrapped), sdkhttp only guards its request bodies.
	awsCfg.HTTPClient = sdkhttp.Client(awsCfg.HTTPClient)
	k, err := newKube(rt, cfg.RegistrationTTL)
	if err != nil {
		return err
	}
	rt.Admin.AddReadiness("informers", k.cache.Ready)
	if err := k.cache.Start(ctx); err != nil {
		return err
	}
	m := newMetrics(rt.Registry)
	api := ec2.NewFromConfig(awsCfg)
	gc := &orphans{ec2: api, cache: k.cache, cluster: cfg.ClusterName, grace: cfg.GCGrace, log: rt.Log, metrics: m, now: time.Now}
	ex := &executor{k: k, cs: rt.Kube, ec2: api, cluster: cfg.ClusterName, bus: rt.Bus, prefix: rt.Bus.Prefix(), log: rt.Log, metrics: m, now: time.Now, events: rt.Events,
		resumeAfter: cfg.ResumeAfter}
	d := &decider{k: k, bus: rt.Bus, prefix: rt.Bus.Prefix(), log: rt.Log, metrics: m, now: time.Now, blockedLogged: map[string]bool{},
		resumeAfter: cfg.ResumeAfter}

	rt.Log.Info().Str("cluster", cfg.ClusterName).Str("queue", cfg.InterruptionQueue).Int("workers", cfg.Workers).Int("urgent_workers", cfg.UrgentWorkers).Bool("v1alpha5", k.cache.Legacy).Msg("terminating nodes")
	g, gctx := errgroup.WithContext(ctx)
	// Decisions run on every change of what they read (nodes, NodeClaims), at most once a
	// service.KickGap, at the next deadline the last run found (a claim misses its registration
	// deadline), and every --interval for what neither announces (a stalled termination to
	// publish again). A failed run is tried again soon.
	kick := service.NewTrigger(service.KickGap)
	if err := k.cache.OnChange(kick.Kick, k.cache.Nodes, k.cache.NodeClaims); err != nil {
		return fmt.Errorf("watching what the decisions read: %w", err)
	}
	g.Go(func() error {
		return service.EveryOrKicked(gctx, cfg.Interval, kick, func() {
			next, err := d.pass(gctx)
			if err != nil && gctx.Err() == nil {
				rt.Log.Warn().Err(err).Msg("deciding terminations")
				next = time.Now().Add(decisionRetry)
			}
			kick.KickAt(next)
		})
	})
	g.Go(func() error {
		return service.Every(gctx, cfg.GCInterval, func() {
			start := time.Now()
			err := gc.collect(gctx)
			m.karp.reconciles.Observe(karpmetrics.ControllerInstanceGC, start, err)
			if err != nil && gctx.Err() == nil {
				rt.Log.Warn().Err(err).Msg("collecting orphaned instances")
			}
		})
	})
	if cfg.InterruptionQueue != "-" {
		p := &poller{sqs: sqs.NewFromConfig(awsCfg), queue: cfg.InterruptionQueue, wait: cfg.SQSWait, bus: rt.Bus, dead: rt.Bus, prefix: rt.Bus.Prefix(),
			claims: k.claimOfInstance, log: rt.Log, metrics: m, now: time.Now}
		g.Go(func() error { return p.run(gctx) })
		g.Go(func() error {
			return bus.Consume(gctx, rt.Bus, bus.ConsumerSpec{Durable: "terminator-interruptions", Subject: rt.Bus.Prefix().AllInterruptions(),
				MaxDeliver: -1, NakDelays: []time.Duration{time.Second, 2 * time.Second, 5 * time.Second},
				Recent: 2 * time.Minute, // a first rollout does not act on a day of stored warnings
			}, p.handleEvent)
		})
	}
	// Two lanes of workers run the same executor: a drain a PodDisruptionBudget holds is
	// redelivered slice after slice, and JetStream hands out redeliveries before new messages,
	// so a few blocked drains on one consumer would keep an interruption waiting past its
	// two minutes. Interruptions have a consumer and workers of their own (see intentSubject).
	lanes := []struct {
		durable, leaf string
		workers       int
	}{
		{"terminator", subject.TerminationsIntents, cfg.Workers},
		{"terminator-urgent", subject.TerminationsUrgent, cfg.UrgentWorkers},
	}
	for _, lane := range lanes {
		for i := 0; i < lane.workers; i++ {
			g.Go(func() error {
				return bus.Consume(gctx, rt.Bus, bus.ConsumerSpec{
					Durable: lane.durable, Subject: rt.Bus.Prefix().Of(lane.leaf),
					AckWait: cfg.IntentAckWait, HandlerTimeout: cfg.DrainSlice, MaxDeliver: -1, Batch: 1,
					NakDelays: []time.Duration{time.Second, 2 * time.Second, 5 * time.Second},
				}, ex.handleMeasured)
			})
		}
	}
	return g.Wait()
}

// decisionRetry is how soon a decision pass that failed (a write or a publish refused) runs
// again, whatever --interval is.
const decisionRetry = 2 * time.Second

// intentSubject is where an intent is published: an interruption's on
// <prefix>.terminations.urgent, every other on <prefix>.terminations.intents.
//
// Only interruptions are urgent: AWS takes the instance at a time of its choosing whatever
// Fleetwright does. Expiry, registration timeouts and manual deletions are forced too, but
// nothing outside waits on them, and an expiry or manual drain may wait on a
// PodDisruptionBudget indefinitely: on the urgent lane it would hold an urgent worker the
// way voluntary drains held interruptions before.
func intentSubject(p subject.Prefix, in *terminationv1.TerminationIntent) string {
	if in.GetReason() == commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED {
		return p.Of(subject.TerminationsUrgent)
	}
	return p.Of(subject.TerminationsIntents)
}

// decider publishes what the terminator decides itself (liveness) and the termination of every
// deleting NodeClaim and Node (deleted.go). Every replica may run it: intent ids are
// deterministic (<nodeclaim-uid>/<reason>), so JetStream drops a repeated decision.
type decider struct {
	k             *kube
	bus           publisher
	prefix        subject.Prefix
	log           zerolog.Logger
	metrics       *metrics
	now           func() time.Time
	blockedLogged map[string]bool
	resumeAfter   time.Duration // see kube.deleting
}

// pass decides about every candidate and acts; it returns when it next needs to run with
// nothing changing (nextDeadline), zero if never.
func (d *decider) pass(ctx context.Context) (time.Time, error) {
	now := d.now()
	cands := d.k.candidates()
	if err := d.k.ensureFinalizers(ctx, cands); err != nil {
		return time.Time{}, err
	}
	for _, c := range cands {
		if !c.Disrupting && c.TraceParent != "" && d.once("watch/"+c.UID) {
			d.traceWatch(ctx, c)
		}
	}
	for _, a := range decide(cands, now) {
		c := a.Candidate
		log := d.log.With().Str("nodeclaim", c.Name).Str("node", c.NodeName).Str("nodepool", c.Pool).Logger()
		if err := d.publishDecision(ctx, a, log); err != nil {
			return time.Time{}, err
		}
	}
	for _, in := range d.k.deleting(now, d.resumeAfter) {
		if err := d.publishDecision(ctx, action{Intent: in, Why: in.GetWhy()},
			d.log.With().Str("nodeclaim", in.GetNodeClaimName()).Str("node", in.GetNodeName()).Logger()); err != nil {
			return time.Time{}, err
		}
	}
	return nextDeadline(cands, now), nil
}

// traceWatch records, in the trace of the scale-up that created it, that the terminator has
// taken a launched claim in its care: from now on its node must register by its deadline, or
// the terminator terminates it (liveness), and its deletion is drained here.
func (d *decider) traceWatch(ctx context.Context, c candidate) {
	registerBy := "registered"
	if !c.RegisterBy.IsZero() {
		registerBy = c.RegisterBy.UTC().Format(time.RFC3339)
	}
	_, span := tracer.Start(telemetry.WithTraceParent(ctx, c.TraceParent), "terminator.watch", trace.WithAttributes(
		attribute.String("fleetwright.nodeclaim", c.Name), attribute.String("fleetwright.node", c.NodeName),
		attribute.String("fleetwright.nodepool", c.Pool), attribute.String("fleetwright.instance_id", c.InstanceID),
		attribute.String("fleetwright.register_by", registerBy)))
	span.End()
}

// publishDecision publishes a termination intent in a span of its own, so the trace of an
// emptiness, expiry or deletion decision runs from here through the drain; its attributes say
// why. The decision is logged in the span (see logDecision).
func (d *decider) publishDecision(ctx context.Context, a action, log zerolog.Logger) error {
	in := a.Intent
	ctx, span := tracer.Start(ctx, "terminator.decide", trace.WithAttributes(
		attribute.String("fleetwright.reason", reasonName(in.GetReason())), attribute.String("fleetwright.nodeclaim", in.GetNodeClaimName()),
		attribute.String("fleetwright.node", in.GetNodeName()), attribute.String("fleetwright.nodepool", in.GetNodePoolName()),
		attribute.String("fleetwright.why", in.GetWhy())))
	err := d.bus.Publish(ctx, intentSubject(d.prefix, in), in, in.GetIntentId())
	if err == nil {
		d.logDecision(a, log.With().Ctx(ctx).Logger())
	}
	endSpan(span, err)
	if err != nil {
		return fmt.Errorf("publishing termination intent: %w", err)
	}
	return nil
}

// logDecision logs a decision once per intent id: the pass repeats it until the executor
// taints the node, and JetStream drops the repeats.
func (d *decider) logDecision(a action, log zerolog.Logger) {
	if !d.once(a.Intent.GetIntentId()) {
		return
	}
	d.metrics.decisions.WithLabelValues(reasonName(a.Intent.GetReason())).Inc()
	if a.Intent.GetReason() == commonv1.TerminationReason_TERMINATION_REASON_REGISTRATION_TIMEOUT {
		d.metrics.karp.disrupted.WithLabelValues(registrationTimeout, a.Candidate.Pool, a.Candidate.CapacityType).Inc()
	}
	log.Info().Str("intent", a.Intent.GetIntentId()).Str("why", a.Intent.GetWhy()).Msg(a.Why)
}
