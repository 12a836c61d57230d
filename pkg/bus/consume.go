package bus

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/fleetwright/fleetwright/pkg/clock"
)

// Delivery describes one delivery of a message to a consumer.
type Delivery struct {
	Subject    string
	Header     nats.Header
	MsgID      string    // Nats-Msg-Id, if the publisher set one
	Stream     string    // stream the message is stored in
	Sequence   uint64    // stream sequence
	Attempt    uint64    // 1 on first delivery
	MaxDeliver int       // the consumer's bound; <= 0 means unlimited
	Published  time.Time // when the stream stored the message
}

// LastAttempt reports whether a failure now dead-letters the message.
func (d Delivery) LastAttempt() bool {
	return d.MaxDeliver > 0 && d.Attempt >= uint64(d.MaxDeliver)
}

// Handler processes one decoded message. Its result decides the message's
// fate: nil acks it; an error retries it after a backoff delay until the
// consumer's MaxDeliver is reached, then dead-letters it; an error wrapped by
// Permanent dead-letters it at once.
type Handler[T proto.Message] func(ctx context.Context, msg T, d Delivery) error

// PermanentError marks an error that retrying cannot fix.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so that the consumer dead-letters the message instead
// of retrying it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err, or an error it wraps, came from Permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// Consume ensures the durable pull consumer described by spec and runs
// handler for each message until ctx is cancelled. Messages are decoded into
// a new T; an undecodable one (bad bytes, or an Fw-Type naming another type)
// is dead-lettered at once and the consumer goes on.
//
// Every fetched message that is not settled yet, running or waiting its turn
// in the batch, is kept in progress with a heartbeat every AckWait/3: the
// server redelivers it only when this process stops beating, that is, dies.
//
// Stopping is graceful: when ctx is cancelled Consume stops fetching, lets
// the handler in flight finish (its context is not cancelled, but ends after
// HandlerTimeout), hands unstarted messages of the current batch back with a
// Nak, and returns nil. It returns an error if the consumer cannot be ensured
// at start or the connection is closed under it.
//
// A consumer that vanishes while Consume runs (deleted, or lost with its
// stream) is created again with the same spec, resuming after the last ack
// floor Consume read; until that succeeds, Conn.Ready reports it.
func Consume[T proto.Message](ctx context.Context, c *Conn, spec ConsumerSpec, handler Handler[T]) error {
	spec = spec.withDefaults()
	cons, err := c.EnsureConsumer(ctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("consuming %s: %w", spec.Subject, err)
	}
	w := &worker[T]{conn: c, spec: spec, handler: handler, log: c.log.With().Str("consumer", spec.Durable).Logger()}
	w.cons.Store(&cons)
	w.info.Store(cons.CachedInfo())
	key := c.health.add()
	defer c.health.remove(key)
	go c.watchLag(ctx, w)
	base := context.WithoutCancel(ctx)
	var floorRead, lastGone time.Time
	for ctx.Err() == nil {
		cons := *w.cons.Load()
		batch, err := cons.Fetch(spec.Batch, jetstream.FetchMaxWait(spec.FetchWait))
		if errors.Is(err, nats.ErrConnectionClosed) {
			return fmt.Errorf("consuming %s: %w", spec.Subject, err)
		}
		if err == nil {
			beats := newHeartbeat(spec.AckWait/3, w.log)
			handled := 0
			for msg := range beats.track(batch.Messages()) {
				handled++
				if ctx.Err() != nil {
					_ = msg.Nak() // not started: let another replica have it now
				} else {
					w.handle(base, msg)
				}
				beats.settled(msg)
			}
			beats.stop()
			if err = batch.Error(); errors.Is(err, nats.ErrTimeout) {
				err = nil
			}
			if handled > 0 && ctx.Err() == nil && time.Since(floorRead) >= floorEvery {
				// Where a re-created consumer would resume. Read at most once a second, not per
				// batch (an API round trip per message for a one-message batch): an older floor
				// only means a few acked messages are handled again after a re-creation, and
				// handlers are idempotent; a floor taken from local acks could skip another
				// replica's unacked messages.
				if info, ierr := cons.Info(ctx); ierr == nil {
					w.info.Store(info)
					floorRead = time.Now()
				}
			}
		}
		if err == nil || ctx.Err() != nil {
			continue
		}
		if consumerGone(err) {
			// A consumer between leaders (its server restarted) answers "no responders" while it
			// still exists, and ensuring it succeeds at once: without a pause this would loop
			// as fast as the server answers, starving the election it waits for.
			if wait := spec.FetchWait - time.Since(lastGone); wait > 0 {
				clock.Sleep(ctx, wait)
			}
			lastGone = time.Now()
			w.reensure(ctx, key, err)
			continue
		}
		w.log.Warn().Err(err).Msg("fetching messages")
		clock.Sleep(ctx, spec.FetchWait)
	}
	return nil
}

// consumerGone reports whether a fetch failed because the consumer (or its stream) no longer
// exists on the server: deleted by hand, or lost with its stream.
func consumerGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, nats.ErrNoResponders)
}

// reensure creates the vanished consumer again with the same spec, resuming after the old
// consumer's ack floor. Until that succeeds the connection is not ready (see Conn.Ready) and
// it is tried again every FetchWait.
func (w *worker[T]) reensure(ctx context.Context, key uint64, cause error) {
	w.log.Warn().Err(cause).Msg("consumer is gone; creating it again")
	for ctx.Err() == nil {
		cons, err := w.conn.ensureConsumer(ctx, w.spec, w.info.Load())
		if err == nil {
			w.cons.Store(&cons)
			w.info.Store(cons.CachedInfo())
			w.conn.health.set(key, nil)
			w.log.Info().Uint64("from_seq", cons.CachedInfo().Config.OptStartSeq).Msg("consumer created again")
			return
		}
		if ctx.Err() != nil {
			return
		}
		w.conn.health.set(key, fmt.Errorf("consumer %s for %s cannot be ensured: %w", w.spec.Durable, w.spec.Subject, err))
		w.log.Error().Err(err).Msg("consumer cannot be created again; not ready")
		clock.Sleep(ctx, w.spec.FetchWait)
	}
}

// floorEvery bounds how often Consume reads its consumer's ack floor between batches.
const floorEvery = time.Second

// settleTimeout bounds acking, nakking or dead-lettering one message.
const settleTimeout = 10 * time.Second

// worker handles the messages of one Consume call.
type worker[T proto.Message] struct {
	conn    *Conn
	spec    ConsumerSpec
	handler Handler[T]
	log     zerolog.Logger
	cons    atomic.Pointer[jetstream.Consumer]     // replaced when the consumer is created again
	info    atomic.Pointer[jetstream.ConsumerInfo] // the latest read, for the ack floor to resume from
}

func (w *worker[T]) consumer() jetstream.Consumer { return *w.cons.Load() }
func (w *worker[T]) durable() string              { return w.spec.Durable }
func (w *worker[T]) observed(info *jetstream.ConsumerInfo) {
	w.info.Store(info)
}

// handle decodes, runs the handler and settles one message: ack, nak with
// delay, or dead-letter and term.
func (w *worker[T]) handle(base context.Context, msg jetstream.Msg) {
	d := w.delivery(msg)
	ctx := w.conn.propagator.Extract(base, HeaderCarrier(msg.Headers()))
	ctx, span := w.conn.tracer.Start(ctx, "process "+d.Subject,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", d.Subject),
			attribute.String("messaging.consumer.group.name", w.spec.Durable),
			attribute.String("messaging.message.id", d.MsgID),
			attribute.Int64("messaging.nats.delivery", int64(d.Attempt)),
		))
	defer span.End()
	// Lines about this message carry its span's trace_id and span_id (telemetry.TraceHook).
	log := w.log.With().Ctx(ctx).Str("subject", d.Subject).Uint64("seq", d.Sequence).Uint64("attempt", d.Attempt).Logger()

	v, err := decode[T](msg)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		log.Error().Err(err).Msg("undecodable message; dead-lettering")
		sctx, cancel := context.WithTimeout(ctx, settleTimeout)
		defer cancel()
		w.deadLetter(sctx, msg, d, err, outcomeUndecodable, log)
		return
	}

	hctx, hcancel := context.WithTimeout(ctx, w.spec.HandlerTimeout)
	start := time.Now()
	err = w.run(hctx, v, d)
	hcancel()
	w.conn.metrics.handle.WithLabelValues(d.Subject).Observe(time.Since(start).Seconds())

	// Settling (ack, nak, dead-letter) gets its own deadline, so a handler
	// that used up its time can still be settled.
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()

	switch {
	case err == nil:
		if aerr := msg.DoubleAck(ctx); aerr != nil {
			log.Warn().Err(aerr).Msg("acking message; it will be redelivered")
			w.count(d, outcomeFailed)
			return
		}
		w.count(d, outcomeAcked)
	case IsPermanent(err) || d.LastAttempt():
		span.SetStatus(codes.Error, err.Error())
		log.Error().Err(err).Msg("handler failed for good; dead-lettering")
		w.deadLetter(ctx, msg, d, err, outcomeDeadLettered, log)
	default:
		span.SetStatus(codes.Error, err.Error())
		delay := w.spec.nakDelay(d.Attempt)
		log.Warn().Err(err).Dur("retry_in", delay).Msg("handler failed; will retry")
		if nerr := msg.NakWithDelay(delay); nerr != nil {
			log.Warn().Err(nerr).Msg("nak failed; the message is redelivered after ack wait")
			w.count(d, outcomeFailed)
			return
		}
		w.count(d, outcomeRetried)
	}
}

// run calls the handler, turning a panic into an error.
func (w *worker[T]) run(ctx context.Context, v T, d Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return w.handler(ctx, v, d)
}

func (w *worker[T]) count(d Delivery, outcome string) {
	w.conn.metrics.messages.WithLabelValues(d.Subject, outcome).Inc()
}

func (w *worker[T]) delivery(msg jetstream.Msg) Delivery {
	d := Delivery{
		Subject:    msg.Subject(),
		Header:     msg.Headers(),
		MsgID:      msg.Headers().Get(HeaderMsgID),
		MaxDeliver: w.spec.MaxDeliver,
		Attempt:    1,
	}
	if meta, err := msg.Metadata(); err == nil {
		d.Stream = meta.Stream
		d.Sequence = meta.Sequence.Stream
		d.Attempt = meta.NumDelivered
		d.Published = meta.Timestamp
	}
	return d
}

// decode unmarshals the payload into a new T, refusing a payload whose
// Fw-Type header names a different message.
func decode[T proto.Message](msg jetstream.Msg) (T, error) {
	var zero T
	v := zero.ProtoReflect().Type().New().Interface().(T)
	want := string(v.ProtoReflect().Descriptor().FullName())
	if got := msg.Headers().Get(HeaderType); got != "" && got != want {
		return zero, fmt.Errorf("decoding message: type %s, want %s", got, want)
	}
	if err := proto.Unmarshal(msg.Data(), v); err != nil {
		return zero, fmt.Errorf("decoding %s: %w", want, err)
	}
	return v, nil
}

// lagInterval is how often a consumer's lag is read from the server.
const lagInterval = 10 * time.Second

// lagWatched is what watchLag needs of a worker.
type lagWatched interface {
	consumer() jetstream.Consumer
	durable() string
	observed(*jetstream.ConsumerInfo)
}

// watchLag keeps the consumer lag gauges current while the consumer runs, and remembers the
// consumer's latest state (its ack floor is where a re-created consumer resumes).
func (c *Conn) watchLag(ctx context.Context, w lagWatched) {
	t := time.NewTicker(lagInterval)
	defer t.Stop()
	for {
		if info, err := w.consumer().Info(ctx); err == nil {
			w.observed(info)
			c.metrics.lag.WithLabelValues(w.durable()).Set(float64(info.NumPending))
			c.metrics.ackWait.WithLabelValues(w.durable()).Set(float64(info.NumAckPending))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
