package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/fleetwright/fleetwright/pkg/clock"
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
//   - Every stream is bounded in bytes (streamMaxBytes) and discards its oldest
//     messages when full; see README.md, "Storage bounds", for why no stream
//     refuses new messages instead.
const (
	duplicateWindow = 2 * time.Minute
	workMaxAge      = 24 * time.Hour
	deadLetterAge   = 7 * 24 * time.Hour
	catalogHistory  = 1
)

// streamMaxBytes is the one place the streams' storage bounds are set, per stream key; the
// catalog bucket's is catalogMaxBytes. Together (2.1 GiB) they leave room, on every NATS
// server holding a replica, for the audit stream (5 GiB) within deploy/'s max_file_store of
// 8 GB. An operator may raise a bound on the server; EnsureStreams keeps the larger.
var streamMaxBytes = map[string]int64{
	subject.StreamPods:          512 << 20,
	subject.StreamLaunch:        256 << 20,
	subject.StreamOfferings:     128 << 20,
	subject.StreamNodes:         256 << 20,
	subject.StreamInterruptions: 128 << 20,
	subject.StreamTerminations:  256 << 20,
	subject.StreamDeadLetter:    512 << 20,
}

const catalogMaxBytes = 128 << 20

// EnsureStreams creates every Fleetwright stream (see subject.Streams) and the
// catalog key-value bucket, as their owners together would: for tests and tools
// that stand in for all four services. A service calls EnsureOwnStreams and
// WaitForStreams instead.
func (c *Conn) EnsureStreams(ctx context.Context) error {
	for _, key := range subject.Streams() {
		if err := c.ensureStream(ctx, key); err != nil {
			return err
		}
	}
	return c.ensureCatalog(ctx)
}

// EnsureOwnStreams creates or updates the streams service owns (subject.OwnedStreams), and the
// catalog bucket if it is subject.CatalogOwner, with Config.StreamReplicas replicas; it touches
// no other stream. It is idempotent, and it never takes back what an operator raised on an
// existing stream: of Replicas, MaxBytes, MaxAge, Duplicates and the bucket's History the
// larger of ours and theirs is kept (and logged), the limits we do not set (MaxMsgs,
// MaxMsgSize, ...) are left as they are, and only what is missing or below ours is changed.
func (c *Conn) EnsureOwnStreams(ctx context.Context, service string) error {
	for _, key := range subject.OwnedStreams(service) {
		if err := c.ensureStream(ctx, key); err != nil {
			return err
		}
	}
	if service == subject.CatalogOwner {
		return c.ensureCatalog(ctx)
	}
	return nil
}

// MissingStreamsError says which streams a service uses are not there yet, and who makes them.
type MissingStreamsError struct {
	Service string
	Missing []string // "FLEETWRIGHT_PODS (created by the pod-watcher)", ...
}

func (e *MissingStreamsError) Error() string {
	return fmt.Sprintf("waiting for streams the %s uses but does not create: %s", e.Service, strings.Join(e.Missing, ", "))
}

// CheckStreams looks up the streams service uses but does not own (subject.StreamsUsed, and the
// catalog bucket if subject.ReadsCatalog) and returns a *MissingStreamsError naming those that
// do not exist yet. It never creates or changes one.
func (c *Conn) CheckStreams(ctx context.Context, service string) error {
	var missing []string
	for _, key := range subject.StreamsUsed(service) {
		name := c.prefix.Stream(key)
		if _, err := c.js.Stream(ctx, name); errors.Is(err, jetstream.ErrStreamNotFound) {
			missing = append(missing, fmt.Sprintf("%s (created by the %s)", name, subject.StreamOwner(key)))
		} else if err != nil {
			return fmt.Errorf("looking up stream %s: %w", name, err)
		}
	}
	if subject.ReadsCatalog(service) {
		bucket := c.prefix.CatalogBucket()
		if _, err := c.js.KeyValue(ctx, bucket); errors.Is(err, jetstream.ErrBucketNotFound) {
			missing = append(missing, fmt.Sprintf("key-value bucket %s (created by the %s)", bucket, subject.CatalogOwner))
		} else if err != nil {
			return fmt.Errorf("looking up key-value bucket %s: %w", bucket, err)
		}
	}
	if len(missing) > 0 {
		return &MissingStreamsError{Service: service, Missing: missing}
	}
	return nil
}

// WaitForStreams waits until every stream service uses but does not own exists (CheckStreams),
// looking again every interval (zero means 2s). Meanwhile Ready fails with what is missing and
// who creates it, and the wait is logged once per change; a service started before the owner of
// a stream it needs thus waits, not ready, rather than failing. A lookup that fails otherwise
// (a timeout while JetStream elects a stream leader, a permissions violation) is tried again
// the same way, the error in Ready and the log; it returns ctx's error when ctx ends first.
func (c *Conn) WaitForStreams(ctx context.Context, service string, interval time.Duration) error {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	key := c.health.add()
	defer c.health.remove(key)
	var last string
	for {
		err := c.CheckStreams(ctx, service)
		if err == nil {
			if last != "" {
				c.log.Info().Msg("the streams this service uses exist now")
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		// Missing streams wait for their owner; a lookup that failed (JetStream electing a
		// stream leader after a server restart, a timeout) is tried again too: neither may end
		// the service, which would only crash-loop.
		c.health.set(key, err)
		if msg := err.Error(); msg != last {
			var missing *MissingStreamsError
			if errors.As(err, &missing) {
				c.log.Warn().Strs("missing", missing.Missing).Msg("waiting for streams other services create")
			} else {
				c.log.Warn().Err(err).Msg("looking up the streams this service uses; trying again")
			}
			last = msg
		}
		if !clock.Sleep(ctx, interval) {
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		}
	}
}

func (c *Conn) ensureStream(ctx context.Context, key string) error {
	cfg := c.streamConfig(key)
	s, err := c.js.Stream(ctx, cfg.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		_, err = c.js.CreateStream(ctx, cfg)
	case err == nil:
		merged := c.mergeStream(cfg, s.CachedInfo().Config)
		if !sameStream(merged, s.CachedInfo().Config) {
			_, err = c.js.UpdateStream(ctx, merged)
		}
	}
	if err != nil {
		return fmt.Errorf("ensuring stream %s: %w", cfg.Name, err)
	}
	return nil
}

func (c *Conn) ensureCatalog(ctx context.Context) error {
	bucket := c.prefix.CatalogBucket()
	cfg := jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "Fleetwright instance catalog: instance types, offerings, prices",
		History:     catalogHistory,
		Storage:     jetstream.FileStorage,
		MaxBytes:    catalogMaxBytes,
		Replicas:    c.replicas,
	}
	if kv, err := c.js.KeyValue(ctx, bucket); err == nil {
		st, err := kv.Status(ctx)
		if err != nil {
			return fmt.Errorf("reading key-value bucket %s: %w", bucket, err)
		}
		theirs := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
		log := c.log.With().Str("bucket", bucket).Logger()
		cfg.Replicas = keepLarger(log, "replicas", cfg.Replicas, theirs.Replicas)
		cfg.MaxBytes = keepLargerLimit(log, "max_bytes", cfg.MaxBytes, theirs.MaxBytes)
		cfg.History = uint8(keepLarger(log, "history", int64(cfg.History), theirs.MaxMsgsPerSubject))
		cfg.TTL, cfg.MaxValueSize = theirs.MaxAge, theirs.MaxMsgSize
		if theirs.Description != "" {
			cfg.Description = theirs.Description
		}
		if theirs.Replicas == cfg.Replicas && theirs.MaxBytes == cfg.MaxBytes && theirs.MaxMsgsPerSubject == int64(cfg.History) {
			return nil
		}
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("reading key-value bucket %s: %w", bucket, err)
	}
	if _, err := c.js.CreateOrUpdateKeyValue(ctx, cfg); err != nil {
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
		MaxBytes:   streamMaxBytes[key],
		Duplicates: duplicateWindow,
		Replicas:   c.replicas,
	}
	if key == subject.StreamDeadLetter {
		cfg.MaxAge = deadLetterAge
		cfg.Description = "Messages that could not be decoded or kept failing; see the Fw-Error header"
	}
	return cfg
}

// mergeStream is the configuration to give an existing stream: theirs, with our subjects,
// retention, discard policy and description, and for each limit we set the larger of ours and
// theirs.
func (c *Conn) mergeStream(ours, theirs jetstream.StreamConfig) jetstream.StreamConfig {
	log := c.log.With().Str("stream", ours.Name).Logger()
	m := theirs
	m.Subjects = ours.Subjects
	m.Retention, m.Discard = ours.Retention, ours.Discard
	if ours.Description != "" {
		m.Description = ours.Description
	}
	m.Replicas = int(keepLarger(log, "replicas", int64(ours.Replicas), int64(theirs.Replicas)))
	m.MaxBytes = keepLargerLimit(log, "max_bytes", ours.MaxBytes, theirs.MaxBytes)
	m.MaxAge = time.Duration(keepLargerLimit(log, "max_age", int64(ours.MaxAge), int64(theirs.MaxAge)))
	m.Duplicates = time.Duration(keepLarger(log, "duplicate_window", int64(ours.Duplicates), int64(theirs.Duplicates)))
	return m
}

// sameStream reports whether updating from b to a would change nothing we set.
func sameStream(a, b jetstream.StreamConfig) bool {
	return slices.Equal(a.Subjects, b.Subjects) && a.Retention == b.Retention && a.Discard == b.Discard &&
		a.Description == b.Description && a.Replicas == b.Replicas && a.MaxBytes == b.MaxBytes &&
		a.MaxAge == b.MaxAge && a.Duplicates == b.Duplicates
}

// keepLarger returns the larger of ours and theirs, logging when it keeps theirs.
func keepLarger[N int | int64](log zerolog.Logger, what string, ours, theirs N) N {
	if theirs > ours {
		log.Info().Int64("ours", int64(ours)).Int64("kept", int64(theirs)).Msgf("keeping the %s set on the server, larger than ours", what)
		return theirs
	}
	return ours
}

// keepLargerLimit is keepLarger for a limit where zero or less means unlimited.
func keepLargerLimit(log zerolog.Logger, what string, ours, theirs int64) int64 {
	if theirs <= 0 {
		log.Info().Int64("ours", ours).Msgf("keeping the unlimited %s set on the server", what)
		return theirs
	}
	return keepLarger(log, what, ours, theirs)
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
	cur, err := c.js.Consumer(ctx, stream, spec.Durable)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("reading consumer %s on %s: %w", spec.Durable, stream, err)
	}
	if err == nil {
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
