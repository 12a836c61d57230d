package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fleetwright/fleetwright/pkg/subject"
)

// Stream settings. Every stream uses file storage and limits retention:
//
//   - Limits (not work-queue) retention, because several services consume the
//     same subjects (launch.results feeds the scheduler and the terminator) and
//     work-queue streams forbid overlapping consumers; and not interest
//     retention, because a message published before its consumer exists would
//     be dropped. Each durable consumer keeps its own ack floor, so nothing is
//     processed twice; MaxAge bounds the history.
//   - A two-minute duplicate window drops re-publishes with the same
//     Nats-Msg-Id (pod-watcher replicas, scheduler retries).
//   - DEADLETTER keeps messages for a week so a human can look at them.
const (
	duplicateWindow = 2 * time.Minute
	workMaxAge      = 24 * time.Hour
	deadLetterAge   = 7 * 24 * time.Hour
	catalogHistory  = 1
)

// EnsureStreams creates or updates every Fleetwright stream (see
// subject.Streams) and the catalog key-value bucket. It is idempotent.
func (c *Conn) EnsureStreams(ctx context.Context) error {
	for _, key := range subject.Streams() {
		cfg := c.streamConfig(key)
		if _, err := c.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("ensuring stream %s: %w", cfg.Name, err)
		}
	}
	bucket := c.prefix.CatalogBucket()
	_, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "Fleetwright instance catalog: instance types, offerings, prices",
		History:     catalogHistory,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("ensuring key-value bucket %s: %w", bucket, err)
	}
	return nil
}

func (c *Conn) streamConfig(key string) jetstream.StreamConfig {
	cfg := jetstream.StreamConfig{
		Name:       c.prefix.Stream(key),
		Subjects:   []string{c.prefix.StreamSubjects(key)},
		Retention:  jetstream.LimitsPolicy,
		Storage:    jetstream.FileStorage,
		Discard:    jetstream.DiscardOld,
		MaxAge:     workMaxAge,
		Duplicates: duplicateWindow,
	}
	if key == subject.StreamDeadLetter {
		cfg.MaxAge = deadLetterAge
		cfg.Description = "Messages that could not be decoded or kept failing; see the Fw-Error header"
	}
	return cfg
}

// ConsumerSpec describes a durable pull consumer.
type ConsumerSpec struct {
	// Durable is the consumer's name, shared by all replicas of a service.
	Durable string
	// Subject is the filter subject, e.g. prefix.Of(subject.LaunchIntents).
	Subject string
	// Stream is the stream name; empty means the stream that captures Subject.
	Stream string
	// AckWait is how long the server waits for an ack, or a heartbeat, before
	// redelivering; zero means 5s. While a handler runs, Consume tells the
	// server the message is in progress every AckWait/3, so a live consumer's
	// message is never redelivered and a dead one's comes back within AckWait.
	AckWait time.Duration
	// HandlerTimeout is how long one handler may run (its context's deadline);
	// zero means 1 minute. A handler that needs longer should return an error
	// and resume on the redelivery.
	HandlerTimeout time.Duration
	// MaxDeliver bounds deliveries; the last failed one is dead-lettered.
	// Zero means 5; negative means unlimited (never dead-letter on retries).
	MaxDeliver int
	// BackOff is the server's redelivery schedule for messages whose ack wait
	// ran out (it replaces AckWait); len(BackOff) must be < MaxDeliver.
	BackOff []time.Duration
	// NakDelays is the delay before retrying after a handler error on
	// delivery n (NakDelays[n-1], the last one repeated); nil means 1s, 5s,
	// 15s, 30s.
	NakDelays []time.Duration
	// MaxAckPending bounds unacknowledged messages across replicas; zero means
	// 1000.
	MaxAckPending int
	// Batch is how many messages one fetch asks for; zero means 10.
	Batch int
	// FetchWait is how long one fetch waits for messages, which bounds how
	// quickly a stop is noticed; zero means 1s.
	FetchWait time.Duration
	// Recent, when positive, makes a consumer created now start with the
	// messages of the last Recent rather than the whole stream: a consumer
	// added to a running system does not act on a day of old messages. An
	// existing consumer keeps where it is.
	Recent time.Duration
}

var defaultNakDelays = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second}

func (s ConsumerSpec) withDefaults() ConsumerSpec {
	if s.AckWait <= 0 {
		s.AckWait = 5 * time.Second
	}
	if s.HandlerTimeout <= 0 {
		s.HandlerTimeout = time.Minute
	}
	if s.MaxDeliver == 0 {
		s.MaxDeliver = 5
	}
	if s.NakDelays == nil {
		s.NakDelays = defaultNakDelays
	}
	if s.MaxAckPending <= 0 {
		s.MaxAckPending = 1000
	}
	if s.Batch <= 0 {
		s.Batch = 10
	}
	if s.FetchWait <= 0 {
		s.FetchWait = time.Second
	}
	return s
}

// nakDelay is the delay before the next attempt after delivery n failed.
func (s ConsumerSpec) nakDelay(delivered uint64) time.Duration {
	if len(s.NakDelays) == 0 {
		return 0
	}
	i := int(delivered) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s.NakDelays) {
		i = len(s.NakDelays) - 1
	}
	return s.NakDelays[i]
}

// EnsureConsumer creates or updates the durable pull consumer described by
// spec and returns it. It is idempotent: an existing consumer keeps where it
// starts.
func (c *Conn) EnsureConsumer(ctx context.Context, spec ConsumerSpec) (jetstream.Consumer, error) {
	return c.ensureConsumer(ctx, spec, nil)
}

// ensureConsumer is EnsureConsumer; gone, when not nil, is the last known state of the same
// consumer that has since been deleted. A consumer created now then resumes after gone's ack
// floor instead of replaying the whole stream, unless the stream itself is newer than gone (it
// was deleted and made again, so the old sequences mean nothing).
func (c *Conn) ensureConsumer(ctx context.Context, spec ConsumerSpec, gone *jetstream.ConsumerInfo) (jetstream.Consumer, error) {
	spec = spec.withDefaults()
	if spec.Durable == "" || spec.Subject == "" {
		return nil, fmt.Errorf("ensuring consumer: durable name and subject are required")
	}
	stream := spec.Stream
	if stream == "" {
		name, err := c.js.StreamNameBySubject(ctx, spec.Subject)
		if err != nil {
			return nil, fmt.Errorf("finding stream for %s: %w", spec.Subject, err)
		}
		stream = name
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       spec.Durable,
		FilterSubject: spec.Subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       spec.AckWait,
		MaxDeliver:    spec.MaxDeliver,
		BackOff:       spec.BackOff,
		MaxAckPending: spec.MaxAckPending,
	}
	// The start is fixed when the consumer is created and cannot change after.
	if cur, err := c.js.Consumer(ctx, stream, spec.Durable); err == nil {
		info := cur.CachedInfo()
		cfg.DeliverPolicy, cfg.OptStartTime, cfg.OptStartSeq = info.Config.DeliverPolicy, info.Config.OptStartTime, info.Config.OptStartSeq
	} else if gone != nil && gone.AckFloor.Stream > 0 && c.streamOlderThan(ctx, stream, gone.Created) {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, gone.AckFloor.Stream+1
	} else if spec.Recent > 0 {
		since := time.Now().Add(-spec.Recent)
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := c.js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("ensuring consumer %s on %s: %w", spec.Durable, stream, err)
	}
	return cons, nil
}

// streamOlderThan reports whether the stream was created before t (so sequences read from a
// consumer created at t still refer to it).
func (c *Conn) streamOlderThan(ctx context.Context, stream string, t time.Time) bool {
	s, err := c.js.Stream(ctx, stream)
	return err == nil && !s.CachedInfo().Created.After(t)
}
