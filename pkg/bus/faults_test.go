package bus_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

// A message as large as the server takes cannot be dead-lettered as it is: the dead letter's
// headers (the error, the original subject, ...) push it over the server's max payload. It is
// dead-lettered with its payload cut to fit, saying so, rather than nakked for ever.
func TestOversizedMessageIsDeadLetteredCut(t *testing.T) {
	const maxPayload = 8 << 10
	srv := bustest.RunServerWith(t, func(o *server.Options) { o.MaxPayload = maxPayload })
	e := newEnv(t)
	e.url = srv.ClientURL()
	c := e.connect(t, "oversized")
	subj := e.prefix.Of(subject.LaunchIntents)
	ctx := context.Background()

	var got received[string]
	collect(t, c, bus.ConsumerSpec{Durable: "launcher", Subject: subj, MaxDeliver: -1, NakDelays: []time.Duration{10 * time.Millisecond}}, &got, value)

	big := nats.NewMsg(subj)
	big.Header.Set(bus.HeaderMsgID, "big-1")
	big.Data = bytes.Repeat([]byte{0xff}, maxPayload-100) // not protobuf; with its header just under the limit
	_, err := c.JetStream().PublishMsg(ctx, big)
	require.NoError(t, err)
	require.NoError(t, c.Publish(ctx, subj, str("good"), "good-1"))

	require.Eventually(t, func() bool { return len(got.snapshot()) == 1 }, waitFor, tick, "the good message after the big one is processed")
	var dl *jetstream.RawStreamMsg
	require.Eventually(t, func() bool { dl = lastDeadLetter(t, c, subj); return dl != nil }, waitFor, tick, "the big message is dead-lettered")
	assert.Contains(t, dl.Header.Get(bus.HeaderError), "decoding google.protobuf.StringValue")
	assert.Equal(t, "8092", dl.Header.Get(bus.HeaderTruncated), "the original size is told")
	assert.Less(t, len(dl.Data), maxPayload-100)
	assert.Equal(t, big.Data[:len(dl.Data)], dl.Data, "what is kept is the payload's start")
	assert.Equal(t, 1.0, counter(t, e.registry, subj, "undecodable"))
	assert.Zero(t, counter(t, e.registry, subj, "failed"), "never nakked for want of room")
}

// Follow dead-letters an undecodable message (once, however many replicas follow it) as well
// as counting it, so a bad message on a followed subject is there to look at.
func TestFollowDeadLettersUndecodableOnce(t *testing.T) {
	e := newEnv(t)
	a := e.connect(t, "follow-a")
	regB := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: e.url, Name: "follow-b", Prefix: string(e.prefix), Registerer: regB})
	require.NoError(t, err)
	defer b.Close()
	subj := e.prefix.Of(subject.OfferingsUnavailable)

	bad := nats.NewMsg(subj)
	bad.Data = []byte{0xff, 0xff, 0xff, 0xff}
	bad.Header.Set(bus.HeaderMsgID, "bad-1")
	_, err = a.JetStream().PublishMsg(ctx, bad)
	require.NoError(t, err)
	since := time.Now().Add(-time.Minute)
	for _, c := range []*bus.Conn{a, b} {
		require.NoError(t, bus.Follow(ctx, c, subj, since, func(context.Context, *wrapperspb.StringValue) {}))
	}
	require.Eventually(t, func() bool { return counter(t, e.registry, subj, "undecodable") == 1 }, waitFor, tick)
	var dl *jetstream.RawStreamMsg
	require.Eventually(t, func() bool { dl = lastDeadLetter(t, a, subj); return dl != nil }, waitFor, tick, "dead-lettered")
	assert.Equal(t, bad.Data, dl.Data)
	assert.Equal(t, subj, dl.Header.Get(bus.HeaderOriginalSubject))
	assert.Contains(t, dl.Header.Get(bus.HeaderError), "decoding google.protobuf.StringValue")
	time.Sleep(200 * time.Millisecond) // the other replica's dead letter, if any, is in
	st, err := a.JetStream().Stream(ctx, e.prefix.Stream(subject.StreamDeadLetter))
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.State.Msgs, "one dead letter for two followers")
}

// A consumer whose replicas are between leaders (R3 on a 3-server cluster, the server leading
// it restarted) answers fetches with "no responders" while it still exists. Consume may take
// that for a vanished consumer and ensure it again, but not in a tight loop: at most once per
// FetchWait, so a leaderless consumer does not burn the CPU its cluster needs to elect one. It
// resumes once the consumer has a leader.
func TestLeaderlessConsumerIsNotEnsuredInATightLoop(t *testing.T) {
	srvs := bustest.RunCluster(t, 3)
	var logs bustest.Buffer
	log := zerolog.New(&logs)
	ctx := context.Background()
	urls := []string{}
	for _, s := range srvs {
		urls = append(urls, s.ClientURL())
	}
	c, err := bus.Connect(ctx, bus.Config{URL: strings.Join(urls, ","), Prefix: "fwlead", Logger: &log, Registerer: prometheus.NewRegistry(), StreamReplicas: 3})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.EnsureStreams(ctx))
	subj := c.Prefix().Of(subject.LaunchIntents)

	var got received[string]
	const fetchWait = 500 * time.Millisecond
	for i := 0; i < 3; i++ { // the launcher's workers
		collect(t, c, bus.ConsumerSpec{Durable: "launcher", Subject: subj, FetchWait: fetchWait}, &got, value)
	}
	require.NoError(t, c.Publish(ctx, subj, wrapperspb.String("before"), "before"))
	require.Eventually(t, func() bool { return len(got.snapshot()) == 1 }, waitFor, tick)

	cons, err := c.JetStream().Consumer(ctx, c.Prefix().Stream(subject.StreamLaunch), "launcher")
	require.NoError(t, err)
	leader := cons.CachedInfo().Cluster.Leader
	start := time.Now()
	for i, s := range srvs {
		if s.Name() == leader {
			srvs[i] = bustest.Restart(t, s)
		}
	}
	require.NoError(t, c.Publish(ctx, subj, wrapperspb.String("after"), "after"))
	require.Eventually(t, func() bool { return len(got.snapshot()) == 2 }, 30*time.Second, tick, "the consumer resumes")
	took := time.Since(start)
	ensured := strings.Count(logs.String(), "consumer is gone; creating it again")
	t.Logf("resumed %s after the restart; consumer ensured again %d times", took.Round(time.Millisecond), ensured)
	assert.LessOrEqual(t, ensured, 3*(int(took/fetchWait)+2), "each worker ensures the consumer at most once per FetchWait")
}
