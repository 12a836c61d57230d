package bus_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

const (
	waitFor = 10 * time.Second
	tick    = 10 * time.Millisecond
)

// env is one in-process server plus what a test needs to look inside.
type env struct {
	url      string
	prefix   subject.Prefix
	registry *prometheus.Registry
	spans    *tracetest.SpanRecorder
	tp       *sdktrace.TracerProvider
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := bustest.RunServer(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &env{
		url:      srv.ClientURL(),
		prefix:   "fwtest",
		registry: prometheus.NewRegistry(),
		spans:    spans,
		tp:       tp,
	}
}

// connect opens a connection that the test closes at its end, and ensures
// the streams.
func (e *env) connect(t *testing.T, name string) *bus.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := bus.Connect(ctx, bus.Config{
		URL:            e.url,
		Name:           name,
		Prefix:         string(e.prefix),
		Registerer:     e.registry,
		TracerProvider: e.tp,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.EnsureStreams(ctx))
	return c
}

// received collects what a handler saw.
type received[T any] struct {
	mu    sync.Mutex
	items []T
}

func (r *received[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items = append(r.items, v)
}

func (r *received[T]) snapshot() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.items...)
}

// runConsumer runs bus.Consume in the background and returns a stop
// function that cancels it and waits for it to return.
func runConsumer(t *testing.T, start func(ctx context.Context) error) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	var once sync.Once
	var result error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(waitFor):
				result = errors.New("consumer did not stop")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// collect runs bus.Consume with spec until the test ends, adding what keep takes from every
// message it handles (e.g. its value, or its delivery) to got.
func collect[T any](t *testing.T, c *bus.Conn, spec bus.ConsumerSpec, got *received[T], keep func(context.Context, *wrapperspb.StringValue, bus.Delivery) T) {
	t.Helper()
	runConsumer(t, func(ctx context.Context) error {
		return bus.Consume(ctx, c, spec, func(ctx context.Context, m *wrapperspb.StringValue, d bus.Delivery) error {
			got.add(keep(ctx, m, d))
			return nil
		})
	})
}

func value(_ context.Context, m *wrapperspb.StringValue, _ bus.Delivery) string { return m.GetValue() }

func delivery(_ context.Context, _ *wrapperspb.StringValue, d bus.Delivery) bus.Delivery { return d }

// lastDeadLetter returns the last message on the dead-letter subject for
// original, or nil if there is none yet.
func lastDeadLetter(t *testing.T, c *bus.Conn, original string) *jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	stream, err := c.JetStream().Stream(ctx, c.Prefix().Stream(subject.StreamDeadLetter))
	require.NoError(t, err)
	msg, err := stream.GetLastMsgForSubject(ctx, c.Prefix().DeadLetter(original))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	require.NoError(t, err)
	return msg
}

func str(s string) *wrapperspb.StringValue { return wrapperspb.String(s) }

func TestEnsureStreamsIsIdempotent(t *testing.T) {
	e := newEnv(t)
	c := e.connect(t, "streams")
	ctx := context.Background()
	require.NoError(t, c.EnsureStreams(ctx), "second call must succeed")

	for _, key := range subject.Streams() {
		s, err := c.JetStream().Stream(ctx, e.prefix.Stream(key))
		require.NoError(t, err, key)
		info := s.CachedInfo()
		assert.Equal(t, []string{e.prefix.StreamSubjects(key)}, info.Config.Subjects)
		assert.Equal(t, jetstream.FileStorage, info.Config.Storage)
		assert.Equal(t, 2*time.Minute, info.Config.Duplicates)
	}
	kv, err := c.JetStream().KeyValue(ctx, e.prefix.CatalogBucket())
	require.NoError(t, err)
	assert.Equal(t, e.prefix.CatalogBucket(), kv.Bucket())

	spec := bus.ConsumerSpec{Durable: "idem", Subject: e.prefix.Of(subject.LaunchIntents), MaxDeliver: 4}
	_, err = c.EnsureConsumer(ctx, spec)
	require.NoError(t, err)
	spec.MaxDeliver = 6
	cons, err := c.EnsureConsumer(ctx, spec)
	require.NoError(t, err, "updating a consumer must succeed")
	assert.Equal(t, 6, cons.CachedInfo().Config.MaxDeliver)
	assert.Equal(t, e.prefix.Stream(subject.StreamLaunch), cons.CachedInfo().Stream)
}

func TestTraceContextSurvivesPublishConsume(t *testing.T) {
	e := newEnv(t)
	c := e.connect(t, "trace")
	subj := e.prefix.Of(subject.PodsPending)

	type seen struct {
		sc      trace.SpanContext
		header  string
		payload string
	}
	var got received[seen]
	collect(t, c, bus.ConsumerSpec{Durable: "trace", Subject: subj}, &got, func(ctx context.Context, m *wrapperspb.StringValue, d bus.Delivery) seen {
		return seen{sc: trace.SpanContextFromContext(ctx), header: d.Header.Get("traceparent"), payload: m.GetValue()}
	})

	ctx, root := e.tp.Tracer("test").Start(context.Background(), "pod went pending")
	require.NoError(t, c.Publish(ctx, subj, str("batch-1"), "batch-1"))
	root.End()

	require.Eventually(t, func() bool { return len(got.snapshot()) == 1 }, waitFor, tick)
	s := got.snapshot()[0]
	assert.Equal(t, "batch-1", s.payload)
	assert.Equal(t, root.SpanContext().TraceID(), s.sc.TraceID(), "consumer runs in the publisher's trace")
	assert.Contains(t, s.header, root.SpanContext().TraceID().String(), "traceparent header carries the trace id")

	// The consumer span is a child of the producer span, which is a child of root.
	var producer, consumer sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		for _, sp := range e.spans.Ended() {
			switch sp.SpanKind() {
			case trace.SpanKindProducer:
				producer = sp
			case trace.SpanKindConsumer:
				consumer = sp
			}
		}
		return producer != nil && consumer != nil
	}, waitFor, tick)
	assert.Equal(t, root.SpanContext().SpanID(), producer.Parent().SpanID())
	assert.Equal(t, producer.SpanContext().SpanID(), consumer.Parent().SpanID())
	assert.True(t, consumer.Parent().IsRemote())
	assert.Equal(t, consumer.SpanContext().SpanID(), s.sc.SpanID(), "handler context holds the consumer span")
}

func TestMalformedPayloadIsDeadLetteredAndConsumerGoesOn(t *testing.T) {
	tests := []struct {
		name      string
		data      []byte
		fwType    string
		wantError string
	}{
		{name: "broken bytes", data: []byte{0xff, 0xff, 0xff, 0xff}, fwType: "google.protobuf.StringValue", wantError: "decoding google.protobuf.StringValue"},
		{name: "wrong type", data: []byte{0x0a, 0x01, 'x'}, fwType: "google.protobuf.Struct", wantError: "type google.protobuf.Struct, want google.protobuf.StringValue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.connect(t, "malformed")
			subj := e.prefix.Of(subject.LaunchIntents)
			ctx := context.Background()

			var got received[string]
			collect(t, c, bus.ConsumerSpec{Durable: "launcher", Subject: subj}, &got, value)

			bad := nats.NewMsg(subj)
			bad.Data = tt.data
			bad.Header.Set(bus.HeaderType, tt.fwType)
			bad.Header.Set(bus.HeaderMsgID, "bad-1")
			_, err := c.JetStream().PublishMsg(ctx, bad)
			require.NoError(t, err)
			require.NoError(t, c.Publish(ctx, subj, str("good"), "good-1"))

			require.Eventually(t, func() bool { return len(got.snapshot()) == 1 }, waitFor, tick,
				"the good message after the bad one is processed")
			assert.Equal(t, []string{"good"}, got.snapshot())

			var dl *jetstream.RawStreamMsg
			require.Eventually(t, func() bool { dl = lastDeadLetter(t, c, subj); return dl != nil }, waitFor, tick)
			assert.Equal(t, e.prefix.DeadLetter(subj), dl.Subject)
			assert.Equal(t, tt.data, dl.Data, "payload kept as it was")
			assert.Contains(t, dl.Header.Get(bus.HeaderError), tt.wantError)
			assert.Equal(t, subj, dl.Header.Get(bus.HeaderOriginalSubject))
			assert.Equal(t, "1", dl.Header.Get(bus.HeaderDeliveries))
			assert.Equal(t, "bad-1", dl.Header.Get(bus.HeaderOriginalMsgID))
			assert.Equal(t, tt.fwType, dl.Header.Get(bus.HeaderType), "original headers copied")

			require.Eventually(t, func() bool {
				return (counter(t, e.registry, subj, "undecodable")) == 1
			}, waitFor, tick)
		})
	}
}

// twoReplicas connects two replicas of the terminator and gives the spec of the durable consumer
// they share: batch messages to a fetch, taken back after a short AckWait (fast recovery).
func twoReplicas(t *testing.T, batch int) (c1, c2 *bus.Conn, spec bus.ConsumerSpec) {
	e := newEnv(t)
	spec = bus.ConsumerSpec{Durable: "terminator", Subject: e.prefix.Of(subject.TerminationsIntents), AckWait: 500 * time.Millisecond, Batch: batch}
	return e.connect(t, "replica-1"), e.connect(t, "replica-2"), spec
}

func TestUnackedMessageIsRedeliveredAfterConsumerDies(t *testing.T) {
	c1, c2, spec := twoReplicas(t, 1)

	started := make(chan struct{})
	release := make(chan struct{})
	died := make(chan error, 1)
	go func() {
		died <- bus.Consume(context.Background(), c1, spec, func(ctx context.Context, _ *wrapperspb.StringValue, _ bus.Delivery) error {
			close(started)
			<-release // dies mid-handle
			return nil
		})
	}()
	require.NoError(t, c1.Publish(context.Background(), spec.Subject, str("drain node-a"), "term-a"))

	select {
	case <-started:
	case <-time.After(waitFor):
		t.Fatal("replica 1 never got the message")
	}
	c1.NATS().Close() // the process dies: no ack will ever reach the server
	close(release)
	select {
	case err := <-died:
		require.ErrorIs(t, err, nats.ErrConnectionClosed, "consumer reports its dead connection")
	case <-time.After(waitFor):
		t.Fatal("consumer 1 did not return after its connection closed")
	}

	var got received[bus.Delivery]
	collect(t, c2, spec, &got, delivery)
	require.Eventually(t, func() bool { return len(got.snapshot()) >= 1 }, waitFor, tick)
	d := got.snapshot()[0]
	assert.Equal(t, "term-a", d.MsgID)
	assert.GreaterOrEqual(t, d.Attempt, uint64(2), "it is a redelivery")
}

// A live consumer keeps its messages however long its handlers run, and however long a
// message waits its turn in a fetched batch: heartbeats keep them in progress, so another
// replica never gets one while the first still works on it (AckWait is short for fast recovery).
func TestSlowHandlerKeepsItsMessagesWithHeartbeats(t *testing.T) {
	c1, c2, spec := twoReplicas(t, 3)
	for _, id := range []string{"a", "b", "c"} {
		require.NoError(t, c1.Publish(context.Background(), spec.Subject, str("drain "+id), "term-"+id))
	}

	var got received[bus.Delivery]
	started := make(chan struct{}, 3)
	runConsumer(t, func(ctx context.Context) error {
		return bus.Consume(ctx, c1, spec, func(_ context.Context, _ *wrapperspb.StringValue, d bus.Delivery) error {
			started <- struct{}{}
			got.add(d)
			time.Sleep(4 * spec.AckWait) // a slow drain
			return nil
		})
	})
	<-started // replica 1 has fetched the batch
	collect(t, c2, spec, &got, delivery)
	require.Eventually(t, func() bool { return len(got.snapshot()) >= 3 }, waitFor, tick)
	time.Sleep(4 * spec.AckWait) // room for a wrongful redelivery to show
	ids := map[string]int{}
	for _, d := range got.snapshot() {
		ids[d.MsgID]++
		assert.Equal(t, uint64(1), d.Attempt, "%s was redelivered while replica 1 still worked on it", d.MsgID)
	}
	assert.Equal(t, map[string]int{"term-a": 1, "term-b": 1, "term-c": 1}, ids, "each message handled once")
}

// A consumer added to a running system with Recent starts at recent messages, not the whole
// stream; once created, it keeps its place when it is ensured again.
func TestRecentConsumerSkipsOldMessages(t *testing.T) {
	e := newEnv(t)
	c := e.connect(t, "terminator")
	subj := e.prefix.Of(subject.TerminationsIntents)
	ctx := context.Background()
	require.NoError(t, c.Publish(ctx, subj, str("stored before the consumer"), "old"))
	spec := bus.ConsumerSpec{Durable: "late", Subject: subj, Recent: time.Nanosecond}
	_, err := c.EnsureConsumer(ctx, spec)
	require.NoError(t, err)
	require.NoError(t, c.Publish(ctx, subj, str("after"), "new"))

	var got received[string]
	collect(t, c, spec, &got, value)
	require.Eventually(t, func() bool { return len(got.snapshot()) == 1 }, waitFor, tick)
	assert.Equal(t, []string{"after"}, got.snapshot(), "only what came after its creation")
}

func TestDuplicateMsgIDIsDropped(t *testing.T) {
	e := newEnv(t)
	c := e.connect(t, "dedup")
	subj := e.prefix.Of(subject.PodsPending)
	ctx := context.Background()

	first, err := c.PublishAck(ctx, subj, str("batch A"), "batch-a")
	require.NoError(t, err)
	assert.False(t, first.Duplicate)
	again, err := c.PublishAck(ctx, subj, str("batch A again"), "batch-a")
	require.NoError(t, err)
	assert.True(t, again.Duplicate, "second publish with the same Nats-Msg-Id is a duplicate")
	assert.Equal(t, first.Sequence, again.Sequence)
	_, err = c.PublishAck(ctx, subj, str("batch B"), "batch-b")
	require.NoError(t, err)

	var got received[string]
	collect(t, c, bus.ConsumerSpec{Durable: "scheduler", Subject: subj}, &got, value)
	// Stream order: had the duplicate been stored, it would come before B.
	require.Eventually(t, func() bool { return len(got.snapshot()) == 2 }, waitFor, tick)
	assert.Equal(t, []string{"batch A", "batch B"}, got.snapshot())

	s, err := c.JetStream().Stream(ctx, e.prefix.Stream(subject.StreamPods))
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), info.State.Msgs)
	assert.Equal(t, float64(1), (publishedCounter(t, e.registry, subj, "duplicate")))
}

func TestRepeatedFailureIsDeadLetteredAfterMaxDeliver(t *testing.T) {
	tests := []struct {
		name           string
		err            error
		wantAttempts   []uint64
		wantDeliveries string
	}{
		{name: "transient error retried until MaxDeliver", err: errors.New("ec2 throttled"), wantAttempts: []uint64{1, 2, 3}, wantDeliveries: "3"},
		{name: "permanent error dead-lettered at once", err: bus.Permanent(errors.New("no such nodepool")), wantAttempts: []uint64{1}, wantDeliveries: "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.connect(t, "failing")
			subj := e.prefix.Of(subject.LaunchIntents)
			spec := bus.ConsumerSpec{Durable: "launcher", Subject: subj, MaxDeliver: 3,
				NakDelays: []time.Duration{10 * time.Millisecond}}

			var attempts received[uint64]
			runConsumer(t, func(ctx context.Context) error {
				return bus.Consume(ctx, c, spec, func(_ context.Context, m *wrapperspb.StringValue, d bus.Delivery) error {
					attempts.add(d.Attempt)
					if m.GetValue() == "ok" {
						return nil
					}
					return tt.err
				})
			})
			require.NoError(t, c.Publish(context.Background(), subj, str("doomed"), "nc-1"))

			var dl *jetstream.RawStreamMsg
			require.Eventually(t, func() bool { dl = lastDeadLetter(t, c, subj); return dl != nil }, waitFor, tick)
			assert.Equal(t, tt.wantAttempts, attempts.snapshot())
			assert.Contains(t, dl.Header.Get(bus.HeaderError), tt.err.Error())
			assert.Equal(t, tt.wantDeliveries, dl.Header.Get(bus.HeaderDeliveries))
			assert.Equal(t, "nc-1", dl.Header.Get(bus.HeaderOriginalMsgID))

			// Terminated, not redelivered: the next message is the only thing seen after.
			require.NoError(t, c.Publish(context.Background(), subj, str("ok"), "nc-2"))
			require.Eventually(t, func() bool { return len(attempts.snapshot()) == len(tt.wantAttempts)+1 }, waitFor, tick)
			require.Eventually(t, func() bool {
				return (counter(t, e.registry, subj, "deadlettered")) == 1 &&
					(counter(t, e.registry, subj, "acked")) == 1 &&
					(counter(t, e.registry, subj, "retried")) == float64(len(tt.wantAttempts)-1)
			}, waitFor, tick)
		})
	}
}

func TestGracefulStopFinishesInFlightHandler(t *testing.T) {
	e := newEnv(t)
	c := e.connect(t, "graceful")
	subj := e.prefix.Of(subject.NodesEvents)
	spec := bus.ConsumerSpec{Durable: "graceful", Subject: subj}

	started := make(chan struct{})
	release := make(chan struct{})
	var handlerCtxErr error
	stop := runConsumer(t, func(ctx context.Context) error {
		return bus.Consume(ctx, c, spec, func(hctx context.Context, _ *wrapperspb.StringValue, _ bus.Delivery) error {
			close(started)
			<-release
			handlerCtxErr = hctx.Err()
			return nil
		})
	})
	require.NoError(t, c.Publish(context.Background(), subj, str("node-a ready"), "n-a"))
	<-started

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	close(release)
	require.NoError(t, <-stopped)
	assert.NoError(t, handlerCtxErr, "in-flight handler is not cancelled by stop")

	cons, err := c.JetStream().Consumer(context.Background(), e.prefix.Stream(subject.StreamNodes), "graceful")
	require.NoError(t, err)
	info, err := cons.Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.AckFloor.Stream, "the in-flight message was acked")
	assert.Equal(t, 0, info.NumAckPending)
}

func TestConnectRejectsBadPrefix(t *testing.T) {
	_, err := bus.Connect(context.Background(), bus.Config{URL: "nats://127.0.0.1:1", Prefix: "fleet.*"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "invalid subject prefix")
}

func TestReadyFollowsConnection(t *testing.T) {
	e := newEnv(t)
	c := e.connect(t, "ready")
	require.NoError(t, c.Ready(context.Background()))
	require.NoError(t, c.Close())
	assert.Error(t, c.Ready(context.Background()))
}

func counter(t *testing.T, reg *prometheus.Registry, subj, outcome string) float64 {
	t.Helper()
	v, _ := sample(t, reg, "fleetwright_bus_messages_total", map[string]string{"subject": subj, "outcome": outcome})
	return v
}

func publishedCounter(t *testing.T, reg *prometheus.Registry, subj, result string) float64 {
	t.Helper()
	v, _ := sample(t, reg, "fleetwright_bus_published_total", map[string]string{"subject": subj, "result": result})
	return v
}

// sample reads the value (a counter's or a gauge's) of the sample of name in reg that has all
// the labels; found is false if there is none.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (value float64, found bool) {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := 0
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] == lp.GetValue() {
					match++
				}
			}
			if match == len(labels) {
				if g := m.GetGauge(); g != nil {
					return g.GetValue(), true
				}
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

// The consumer's lag — messages not yet delivered — and its unacknowledged messages are
// exported as gauges.
func TestConsumerLagIsExported(t *testing.T) {
	e := newEnv(t)
	c := e.connect(t, "lag")
	subj := e.prefix.Of(subject.NodesEvents)
	for i := range 5 {
		require.NoError(t, c.Publish(context.Background(), subj, str(fmt.Sprint("node-", i)), fmt.Sprint("lag-", i)))
	}
	release := make(chan struct{})
	stop := runConsumer(t, func(ctx context.Context) error {
		return bus.Consume(ctx, c, bus.ConsumerSpec{Durable: "lagging", Subject: subj, Batch: 1},
			func(context.Context, *wrapperspb.StringValue, bus.Delivery) error { <-release; return nil })
	})
	defer func() { close(release); _ = stop() }()
	require.Eventually(t, func() bool {
		lag := gaugeValue(t, e.registry, "fleetwright_bus_consumer_lag_messages", "lagging")
		pending := gaugeValue(t, e.registry, "fleetwright_bus_consumer_ack_pending_messages", "lagging")
		return lag+pending == 5 && lag >= 4
	}, 10*time.Second, 20*time.Millisecond, "5 messages waiting, at most one of them delivered")
}

// gaugeValue reads the consumer's gauge name from reg (-1 if absent).
func gaugeValue(t *testing.T, reg *prometheus.Registry, name, consumer string) float64 {
	t.Helper()
	if v, ok := sample(t, reg, name, map[string]string{"consumer": consumer}); ok {
		return v
	}
	return -1
}

// Follow replays from the given time (an earlier message is not seen), hands each message to the
// handler in its publisher's trace, and skips an undecodable one, counting it.
func TestFollowReplaysFromATimeWithTraceAndSkipsUndecodable(t *testing.T) {
	e := newEnv(t)
	c := e.connect(t, "follow")
	subj := e.prefix.Of(subject.OfferingsUnavailable)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	require.NoError(t, c.Publish(ctx, subj, str("too-old"), "old-1"))
	name, err := c.JetStream().StreamNameBySubject(ctx, subj)
	require.NoError(t, err)
	stream, err := c.JetStream().Stream(ctx, name)
	require.NoError(t, err)
	old, err := stream.GetLastMsgForSubject(ctx, subj)
	require.NoError(t, err)
	since := old.Time.Add(time.Nanosecond) // just after it, by the stream's own clock
	bad := nats.NewMsg(subj)
	bad.Data = []byte{0xff, 0xff, 0xff, 0xff}
	bad.Header.Set(bus.HeaderType, "google.protobuf.StringValue")
	bad.Header.Set(bus.HeaderMsgID, "bad-1")
	_, err = c.JetStream().PublishMsg(ctx, bad)
	require.NoError(t, err)
	pctx, root := e.tp.Tracer("test").Start(ctx, "offering ran out")
	require.NoError(t, c.Publish(pctx, subj, str("recent"), "new-1"))
	root.End()

	type seen struct {
		value string
		trace trace.TraceID
	}
	var got received[seen]
	require.NoError(t, bus.Follow(ctx, c, subj, since, func(ctx context.Context, v *wrapperspb.StringValue) {
		got.add(seen{value: v.GetValue(), trace: trace.SpanContextFromContext(ctx).TraceID()})
	}))
	require.Eventually(t, func() bool { return len(got.snapshot()) == 1 }, waitFor, tick)
	assert.Equal(t, []seen{{value: "recent", trace: root.SpanContext().TraceID()}}, got.snapshot(),
		"only what was published since, in the publisher's trace")
	require.Eventually(t, func() bool { return counter(t, e.registry, subj, "undecodable") == 1 }, waitFor, tick)
	assert.Equal(t, 1.0, counter(t, e.registry, subj, "followed"))
}
