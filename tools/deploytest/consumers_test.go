package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/subject"
)

// TestServicesCannotTouchOthersConsumers: where two services read one stream, neither may
// create (or overwrite), delete or pull the other's durable consumer; each still may its own.
func TestServicesCannotTouchOthersConsumers(t *testing.T) {
	url, pw := shippedServer(t)
	p := subject.DefaultPrefix
	ensureStreams(t, url, pw)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, d := range durables(p) {
		own, _ := connectAs(t, url, d.owner, pw[d.owner])
		js, err := jetstream.New(own)
		require.NoError(t, err)
		_, err = js.CreateOrUpdateConsumer(ctx, d.stream, jetstream.ConsumerConfig{Durable: d.name, AckPolicy: jetstream.AckExplicitPolicy})
		require.NoError(t, err, "%s creates its own consumer %s", d.owner, d.name)
	}
	cases := []struct{ user, stream, durable string }{
		{"terminator", p.Stream(subject.StreamInterruptions), "scheduler-interruptions"},
		{"scheduler", p.Stream(subject.StreamInterruptions), "terminator-interruptions"},
		{"terminator", p.Stream(subject.StreamLaunch), "launcher"},
	}
	for _, tc := range cases {
		t.Run(tc.user+"/"+tc.durable, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			nc, errs := connectAs(t, url, tc.user, pw[tc.user])
			js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(time.Second))
			require.NoError(t, err)
			_, err = js.CreateOrUpdateConsumer(ctx, tc.stream, jetstream.ConsumerConfig{Durable: tc.durable, AckPolicy: jetstream.AckExplicitPolicy,
				MaxDeliver: 1})
			require.Error(t, err, "%s overwrote %s", tc.user, tc.durable)
			ctx2, cancel2 := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel2()
			require.Error(t, js.DeleteConsumer(ctx2, tc.stream, tc.durable), "%s deleted %s", tc.user, tc.durable)
			require.NoError(t, nc.Publish("$JS.API.CONSUMER.MSG.NEXT."+tc.stream+"."+tc.durable, []byte(`{"batch":1}`)))
			require.NoError(t, nc.Flush())
			require.Eventually(t, func() bool { return len(errs.violations()) > 0 }, 5*time.Second, 10*time.Millisecond)
			// The consumer is still there, as its owner made it.
			owner := map[string]string{"scheduler-interruptions": "scheduler", "terminator-interruptions": "terminator", "launcher": "launcher"}[tc.durable]
			onc, _ := connectAs(t, url, owner, pw[owner])
			ojs, err := jetstream.New(onc)
			require.NoError(t, err)
			ctx3, cancel3 := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel3()
			c, err := ojs.Consumer(ctx3, tc.stream, tc.durable)
			require.NoError(t, err)
			require.Zero(t, c.CachedInfo().Config.MaxDeliver-(-1), "the owner's consumer config is unchanged")
		})
	}
}
