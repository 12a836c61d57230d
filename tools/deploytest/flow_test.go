package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/fleetwright/fleetwright/pkg/bus/bustest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/catalogkv"
	"github.com/fleetwright/fleetwright/pkg/subject"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	interruptionv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/interruption/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// busAs connects through pkg/bus as one user (the way a service does: NATS_USER and
// NATS_PASSWORD beside a NATS_URL without them), ensures the streams it owns and waits for the
// others it uses, as service.Start does: call it for the owners first (startOrder).
func busAs(t *testing.T, ctx context.Context, serverURL, user, password string, logs *bustest.Buffer) *bus.Conn {
	t.Helper()
	log := zerolog.New(logs).With().Str("user", user).Logger()
	c, err := bus.Connect(ctx, bus.Config{URL: serverURL, User: user, Password: password, Name: user, InboxPrefix: subject.Inbox(user), Logger: &log, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.EnsureOwnStreams(ctx, user), "%s ensures its streams at start", user)
	require.NoError(t, c.WaitForStreams(ctx, user, 50*time.Millisecond), "%s finds the streams it uses", user)
	return c
}

// startOrder starts each service after the owners of the streams it uses (see subject's
// streamOwners).
var startOrder = []string{subject.PodWatcher, subject.Launcher, subject.Terminator, subject.Scheduler}

// consumeOne runs a durable consumer the way the services do and returns the first message.
func consumeOne[T proto.Message](t *testing.T, ctx context.Context, c *bus.Conn, durable, subj string) <-chan T {
	t.Helper()
	got := make(chan T, 1)
	go func() {
		_ = bus.Consume[T](ctx, c, bus.ConsumerSpec{Durable: durable, Subject: subj, FetchWait: 200 * time.Millisecond},
			func(_ context.Context, m T, _ bus.Delivery) error {
				select {
				case got <- m:
				default:
				}
				return nil
			})
	}()
	return got
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("no %s within 15s", what)
		var zero T
		return zero
	}
}

// TestServicesWorkUnderTheirUsers runs each service's real bus operations under its own user
// against the shipped permissions: the permissions must be enough for the whole flow, and
// nothing along the way may hit a permissions violation.
func TestServicesWorkUnderTheirUsers(t *testing.T) {
	serverURL, pw := shippedServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logs := &bustest.Buffer{}
	p := subject.DefaultPrefix
	conns := map[string]*bus.Conn{}
	for _, user := range startOrder {
		conns[user] = busAs(t, ctx, serverURL, user, pw[user], logs)
	}

	// The tap (audit user) sees everything under the prefix.
	audit, _ := connectAs(t, serverURL, "audit", pw["audit"])
	tap, err := audit.SubscribeSync(p.All())
	require.NoError(t, err)
	require.NoError(t, audit.Flush())

	// pod-watcher -> scheduler.
	batches := consumeOne[*podsv1.PendingPodBatch](t, ctx, conns["scheduler"], "scheduler", p.Of(subject.PodsPending))
	require.NoError(t, conns["pod-watcher"].Publish(ctx, p.Of(subject.PodsPending), &podsv1.PendingPodBatch{BatchId: "b1"}, "b1"))
	require.Equal(t, "b1", receive(t, batches, "pending batch").GetBatchId())
	tapped, err := tap.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, p.Of(subject.PodsPending), tapped.Subject)

	// scheduler -> launcher.
	intents := consumeOne[*launchv1.LaunchIntent](t, ctx, conns["launcher"], "launcher", p.Of(subject.LaunchIntents))
	require.NoError(t, conns["scheduler"].Publish(ctx, p.Of(subject.LaunchIntents), &launchv1.LaunchIntent{NodeClaimName: "nc-1"}, "nc-1"))
	require.Equal(t, "nc-1", receive(t, intents, "launch intent").GetNodeClaimName())

	// launcher -> catalog bucket -> scheduler's watch.
	js := conns["launcher"].JetStream()
	kv, err := js.KeyValue(ctx, p.CatalogBucket())
	require.NoError(t, err)
	_, err = catalogkv.Publish(ctx, kv, &catalogv1.Catalog{Region: "us-east-1", InstanceTypes: []*catalogv1.InstanceType{{Name: "m5.large"}}})
	require.NoError(t, err)
	skv, err := conns["scheduler"].JetStream().KeyValue(ctx, p.CatalogBucket())
	require.NoError(t, err)
	w, err := catalogkv.Watch(ctx, skv)
	require.NoError(t, err)
	receive(t, w.Ready(), "catalog")
	cat, _, err := w.Catalog()
	require.NoError(t, err)
	require.Len(t, cat.GetInstanceTypes(), 1)

	// launcher -> scheduler and the launcher's other replicas: unavailable offerings, followed
	// (bus.Follow, an ordered consumer) by both services.
	followed := map[string]chan *launchv1.OfferingUnavailable{}
	for _, user := range []string{"scheduler", "launcher"} {
		ch := make(chan *launchv1.OfferingUnavailable, 1)
		followed[user] = ch
		require.NoError(t, bus.Follow(ctx, conns[user], p.Of(subject.OfferingsUnavailable), time.Now().Add(-time.Minute),
			func(_ context.Context, o *launchv1.OfferingUnavailable) { ch <- o }), user)
	}
	require.NoError(t, conns["launcher"].Publish(ctx, p.Of(subject.OfferingsUnavailable), &launchv1.OfferingUnavailable{InstanceType: "m5.large"}, "u1"))
	for user, ch := range followed {
		require.Equal(t, "m5.large", receive(t, ch, user+" follows unavailable offerings").GetInstanceType())
	}
	require.NoError(t, conns["launcher"].Publish(ctx, p.Of(subject.LaunchResults), &launchv1.LaunchResult{NodeClaimName: "nc-1"}, "r1"))

	// terminator: interruptions in, termination intents through its workers, results out; it
	// also reads launch results.
	interruptions := consumeOne[*interruptionv1.InterruptionEvent](t, ctx, conns["terminator"], "terminator-interruptions", p.AllInterruptions())
	require.NoError(t, conns["terminator"].Publish(ctx, p.Interruptions(subject.InterruptionSpot), &interruptionv1.InterruptionEvent{}, "i1"))
	receive(t, interruptions, "interruption")
	terminations := consumeOne[*terminationv1.TerminationIntent](t, ctx, conns["terminator"], "terminator", p.Of(subject.TerminationsIntents))
	require.NoError(t, conns["terminator"].Publish(ctx, p.Of(subject.TerminationsIntents), &terminationv1.TerminationIntent{}, "t1"))
	receive(t, terminations, "termination intent")
	require.NoError(t, conns["terminator"].Publish(ctx, p.Of(subject.TerminationsResults), &terminationv1.TerminationResult{}, "t1"))
	results := consumeOne[*launchv1.LaunchResult](t, ctx, conns["terminator"], "terminator-launch-results", p.Of(subject.LaunchResults))
	require.Equal(t, "nc-1", receive(t, results, "launch result").GetNodeClaimName())

	require.NotContains(t, logs.String(), "Permissions Violation")
	require.NotContains(t, logs.String(), "permissions violation")
}
