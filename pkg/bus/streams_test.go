package bus_test

import (
	"context"
	"testing"
	"time"

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
