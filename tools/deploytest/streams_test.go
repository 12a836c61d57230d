package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/subject"
)

// TestServicesCannotUpdateOthersStreams: under the shipped permissions each stream (and the
// catalog bucket) is created and updated by its owner alone. Every other service may look it
// up, but its $JS.API.STREAM.UPDATE (and CREATE) is refused and the stream keeps its config;
// the owner's update goes through.
func TestServicesCannotUpdateOthersStreams(t *testing.T) {
	url, pw := shippedServer(t)
	p := subject.DefaultPrefix
	ensureStreams(t, url, pw)
	jsAs := func(user string) jetstream.JetStream {
		nc, _ := connectAs(t, url, user, pw[user])
		js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(500*time.Millisecond))
		require.NoError(t, err)
		return js
	}
	owners := map[string]string{catalogStream(p): subject.CatalogOwner}
	for _, key := range subject.Streams() {
		owners[p.Stream(key)] = subject.StreamOwner(key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := jsAs(subject.CatalogOwner).CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: p.CatalogBucket()})
	require.NoError(t, err, "the launcher creates the catalog bucket")

	services := []string{subject.PodWatcher, subject.Scheduler, subject.Launcher, subject.Terminator}
	for stream, owner := range owners {
		for _, user := range services {
			if user == owner {
				continue
			}
			t.Run(user+"/"+stream, func(t *testing.T) {
				js := jsAs(user)
				cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer ccancel()
				cur, err := jsAs(owner).Stream(cctx, stream)
				require.NoError(t, err)
				cfg := cur.CachedInfo().Config
				cfg.MaxMsgs = 7
				// A refused request gets no reply: a short wait of its own.
				denied := func() context.Context {
					dctx, dcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
					t.Cleanup(dcancel)
					return dctx
				}
				_, err = js.UpdateStream(denied(), cfg)
				require.Error(t, err, "%s updated %s, which the %s owns", user, stream, owner)
				_, err = js.CreateStream(denied(), jetstream.StreamConfig{Name: stream, Subjects: cfg.Subjects})
				require.Error(t, err, "%s may not create %s either", user, stream)
				after, err := jsAs(owner).Stream(cctx, stream)
				require.NoError(t, err)
				require.Equal(t, cur.CachedInfo().Config.MaxMsgs, after.CachedInfo().Config.MaxMsgs, "%s is unchanged", stream)
			})
		}
	}
	// Each owner may update its own.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for stream, owner := range owners {
		js := jsAs(owner)
		cur, err := js.Stream(ctx, stream)
		require.NoError(t, err)
		cfg := cur.CachedInfo().Config
		cfg.MaxMsgs = 1 << 20
		_, err = js.UpdateStream(ctx, cfg)
		require.NoError(t, err, "the %s updates its own %s", owner, stream)
	}
}
