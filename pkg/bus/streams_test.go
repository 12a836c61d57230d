package bus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

// Every stream and the catalog bucket are bounded in bytes, and every stream says what it
// discards when full.
func TestEveryStreamIsBounded(t *testing.T) {
	e := newEnv(t)
	c := e.connect(t, "bounded")
	ctx := context.Background()
	for _, key := range subject.Streams() {
		s, err := c.JetStream().Stream(ctx, e.prefix.Stream(key))
		require.NoError(t, err, key)
		cfg := s.CachedInfo().Config
		assert.Positive(t, cfg.MaxBytes, "%s has a byte bound", key)
		assert.Equal(t, jetstream.DiscardOld, cfg.Discard, key)
		assert.Equal(t, 1, cfg.Replicas, "%s: one replica by default", key)
	}
	kv, err := c.JetStream().KeyValue(ctx, e.prefix.CatalogBucket())
	require.NoError(t, err)
	st, err := kv.Status(ctx)
	require.NoError(t, err)
	assert.Positive(t, st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.MaxBytes, "the catalog bucket has a byte bound")
}

// Limits an operator raised on a stream (nats stream edit) survive a service's start; what
// an operator lowered below ours is put back.
func TestEnsureStreamsKeepsWhatAnOperatorRaised(t *testing.T) {
	e := newEnv(t)
	c := e.connect(t, "raised")
	ctx := context.Background()
	name := e.prefix.Stream(subject.StreamPods)
	s, err := c.JetStream().Stream(ctx, name)
	require.NoError(t, err)
	ours := s.CachedInfo().Config
	cfg := ours
	cfg.MaxBytes = ours.MaxBytes * 4
	cfg.MaxAge = 72 * time.Hour
	cfg.Duplicates = 10 * time.Minute
	cfg.MaxMsgs = 12345 // a limit we do not set is the operator's
	_, err = c.JetStream().UpdateStream(ctx, cfg)
	require.NoError(t, err)
	launch, err := c.JetStream().Stream(ctx, e.prefix.Stream(subject.StreamLaunch))
	require.NoError(t, err)
	lower := launch.CachedInfo().Config
	oursLaunch := lower.MaxBytes
	lower.MaxBytes /= 2
	_, err = c.JetStream().UpdateStream(ctx, lower)
	require.NoError(t, err)

	require.NoError(t, c.EnsureStreams(ctx))
	s, err = c.JetStream().Stream(ctx, name)
	require.NoError(t, err)
	got := s.CachedInfo().Config
	assert.Equal(t, ours.MaxBytes*4, got.MaxBytes)
	assert.Equal(t, 72*time.Hour, got.MaxAge)
	assert.Equal(t, 10*time.Minute, got.Duplicates)
	assert.Equal(t, int64(12345), got.MaxMsgs)
	launch, err = c.JetStream().Stream(ctx, e.prefix.Stream(subject.StreamLaunch))
	require.NoError(t, err)
	assert.Equal(t, oursLaunch, launch.CachedInfo().Config.MaxBytes, "a bound below ours is raised back")
}

// Replicas come from Config.StreamReplicas; a service started with fewer never lowers them
// (a rolling restart of the NATS servers then keeps every stream available).
func TestStreamReplicasAreNeverLowered(t *testing.T) {
	srvs := bustest.RunCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func(replicas int) *bus.Conn {
		c, err := bus.Connect(ctx, bus.Config{URL: srvs[0].ClientURL(), Prefix: "fwtest", StreamReplicas: replicas,
			Registerer: prometheus.NewRegistry()})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, c.EnsureStreams(ctx))
		return c
	}
	replicas := func(c *bus.Conn) map[string]int {
		got := map[string]int{}
		for _, key := range subject.Streams() {
			s, err := c.JetStream().Stream(ctx, c.Prefix().Stream(key))
			require.NoError(t, err)
			got[key] = s.CachedInfo().Config.Replicas
		}
		st, err := c.JetStream().Stream(ctx, "KV_"+c.Prefix().CatalogBucket())
		require.NoError(t, err)
		got["catalog"] = st.CachedInfo().Config.Replicas
		return got
	}
	three := connect(3)
	for key, n := range replicas(three) {
		assert.Equal(t, 3, n, key)
	}
	one := connect(1)
	for key, n := range replicas(one) {
		assert.Equal(t, 3, n, "%s: a service configured with one replica leaves three", key)
	}
}

// A service creates and updates only the streams it owns: the terminator's start leaves the
// launcher's LAUNCH stream as it found it (a bound below ours stays below), waits while a
// stream it uses is missing, and the launcher's start then raises the bound.
func TestOnlyTheOwnerChangesAStream(t *testing.T) {
	srv := bustest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func(name string) *bus.Conn {
		c, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL(), Prefix: "fwtest", Name: name, Registerer: prometheus.NewRegistry()})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	term, launcher := connect(subject.Terminator), connect(subject.Launcher)
	p := subject.Prefix("fwtest")
	var none *bus.MissingStreamsError
	require.ErrorAs(t, connect(subject.Scheduler).CheckStreams(ctx, subject.Scheduler), &none)
	assert.Contains(t, none.Missing, "key-value bucket fwtest-catalog (created by the launcher)", "the scheduler waits for the catalog too")
	launch := p.Stream(subject.StreamLaunch)
	// Someone made LAUNCH by hand, small and with a one-second duplicate window.
	_, err := term.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: launch, Subjects: []string{p.StreamSubjects(subject.StreamLaunch)},
		MaxBytes: 1 << 20, Duplicates: time.Second})
	require.NoError(t, err)

	require.NoError(t, term.EnsureOwnStreams(ctx, subject.Terminator))
	for _, key := range subject.OwnedStreams(subject.Terminator) {
		_, err := term.JetStream().Stream(ctx, p.Stream(key))
		require.NoError(t, err, "the terminator creates its own %s", key)
	}
	// NODES and DEADLETTER (the launcher's) are missing: the terminator waits, not ready,
	// naming them and their owner, and creates none of them.
	var missing *bus.MissingStreamsError
	require.ErrorAs(t, term.CheckStreams(ctx, subject.Terminator), &missing)
	assert.ElementsMatch(t, []string{p.Stream(subject.StreamNodes) + " (created by the launcher)",
		p.Stream(subject.StreamDeadLetter) + " (created by the launcher)"}, missing.Missing)
	waited := make(chan error, 1)
	go func() { waited <- term.WaitForStreams(ctx, subject.Terminator, 20*time.Millisecond) }()
	require.Eventually(t, func() bool {
		err := term.Ready(ctx)
		return err != nil && strings.Contains(err.Error(), p.Stream(subject.StreamNodes)+" (created by the launcher)")
	}, 10*time.Second, 10*time.Millisecond, "Ready names the missing stream and its owner")
	for _, key := range []string{subject.StreamNodes, subject.StreamDeadLetter} {
		_, err := term.JetStream().Stream(ctx, p.Stream(key))
		require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "a non-owner does not create %s", key)
	}
	s, err := term.JetStream().Stream(ctx, launch)
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), s.CachedInfo().Config.MaxBytes, "a non-owner does not change LAUNCH")
	assert.Equal(t, time.Second, s.CachedInfo().Config.Duplicates)

	require.NoError(t, launcher.EnsureOwnStreams(ctx, subject.Launcher))
	select {
	case err := <-waited:
		require.NoError(t, err, "the wait ends once the owner made the streams")
	case <-ctx.Done():
		t.Fatal("WaitForStreams did not return after the launcher made its streams")
	}
	require.NoError(t, term.Ready(ctx))
	s, err = term.JetStream().Stream(ctx, launch)
	require.NoError(t, err)
	assert.Greater(t, s.CachedInfo().Config.MaxBytes, int64(1<<20), "the owner raises its stream's bound")
	assert.Equal(t, 2*time.Minute, s.CachedInfo().Config.Duplicates)
}

// A lookup that fails for another reason than a missing stream (here: JetStream is off, as it is
// for a moment while a restarted server catches up) does not end the wait — the service would
// only crash-loop — but keeps it not ready, with the error, until ctx ends.
func TestWaitForStreamsRetriesFailedLookups(t *testing.T) {
	srv := bustest.RunServerWith(t, func(o *server.Options) { o.JetStream = false })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL(), Name: "scheduler", Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	defer wcancel()
	waited := make(chan error, 1)
	go func() { waited <- c.WaitForStreams(wctx, subject.Scheduler, 20*time.Millisecond) }()
	require.Eventually(t, func() bool {
		err := c.Ready(ctx)
		return err != nil && strings.Contains(err.Error(), "looking up stream")
	}, 10*time.Second, 10*time.Millisecond, "Ready says the lookup fails")
	select {
	case err := <-waited:
		require.ErrorIs(t, err, context.DeadlineExceeded, "the wait ended only with its context")
	case <-ctx.Done():
		t.Fatal("WaitForStreams did not return when its context ended")
	}
}
