package offerings

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/catalogkv"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

func TestUnavailableExpiry(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := now
	u := NewUnavailable(func() time.Time { return clock })
	od, spot := commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND, commonv1.CapacityType_CAPACITY_TYPE_SPOT
	tests := []struct {
		name string
		msg  *launchv1.OfferingUnavailable
		kept bool
	}{
		{"explicit expiry in the future", &launchv1.OfferingUnavailable{InstanceType: "a", Zone: "z1", CapacityType: spot,
			ExpireTime: timestamppb.New(now.Add(time.Minute))}, true},
		{"already expired (replayed too late)", &launchv1.OfferingUnavailable{InstanceType: "b", Zone: "z1", CapacityType: spot,
			ExpireTime: timestamppb.New(now.Add(-time.Second))}, false},
		{"observe time + ttl", &launchv1.OfferingUnavailable{InstanceType: "c", Zone: "z1", CapacityType: od,
			ObserveTime: timestamppb.New(now.Add(-time.Minute)), Ttl: durationpb.New(3 * time.Minute)}, true},
		{"observe time + default 3 min, elapsed", &launchv1.OfferingUnavailable{InstanceType: "d", Zone: "z1", CapacityType: od,
			ObserveTime: timestamppb.New(now.Add(-4 * time.Minute))}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, err := u.Add(tt.msg)
			assert.NoError(t, err)
			assert.Equal(t, tt.kept, kept)
		})
	}
	assert.Equal(t, []scheduling.OfferingKey{{InstanceType: "a", Zone: "z1", CapacityType: "spot"},
		{InstanceType: "c", Zone: "z1", CapacityType: "on-demand"}}, u.Current())
	clock = now.Add(90 * time.Second)
	assert.Equal(t, []scheduling.OfferingKey{{InstanceType: "c", Zone: "z1", CapacityType: "on-demand"}}, u.Current(),
		"each offering is avoided until its own expiry")
}

func TestCapacityTypeNames(t *testing.T) {
	for _, name := range []string{"spot", "on-demand"} {
		assert.Equal(t, name, CapacityTypeName(CapacityType(name)))
	}
	assert.Equal(t, commonv1.CapacityType_CAPACITY_TYPE_UNSPECIFIED, CapacityType("reserved"), "unknown is unspecified, never on-demand")
	assert.Empty(t, CapacityTypeName(commonv1.CapacityType_CAPACITY_TYPE_UNSPECIFIED))
}

// Offerings added and never read again (a launcher that marks offerings from the bus but does
// not launch) are forgotten once expired: the cache holds what is unavailable now, no more.
func TestUnavailableForgetsExpiredOfferingsWithoutReads(t *testing.T) {
	clock := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	u := NewUnavailable(func() time.Time { return clock })
	for i := 0; i < 1000; i++ {
		kept, err := u.Add(&launchv1.OfferingUnavailable{InstanceType: fmt.Sprintf("t%d", i), Zone: "z1",
			CapacityType: commonv1.CapacityType_CAPACITY_TYPE_SPOT, Ttl: durationpb.New(3 * time.Minute)})
		assert.NoError(t, err)
		assert.True(t, kept)
		clock = clock.Add(time.Minute)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	assert.Equal(t, 3, len(u.entries), "only the offerings added within the last TTL are held")
}

// Issue 31, item 5: one message cannot block an offering for longer than MaxTTL, whatever
// expiry or TTL it names.
func TestUnavailableCapsExpiry(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := now
	u := NewUnavailable(func() time.Time { return clock })
	spot := commonv1.CapacityType_CAPACITY_TYPE_SPOT
	u.Add(&launchv1.OfferingUnavailable{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: spot,
		ExpireTime: timestamppb.New(now.Add(365 * 24 * time.Hour))})
	u.Add(&launchv1.OfferingUnavailable{InstanceType: "m5.xlarge", Zone: "us-east-1a", CapacityType: spot,
		ObserveTime: timestamppb.New(now), Ttl: durationpb.New(365 * 24 * time.Hour)})
	assert.Len(t, u.Current(), 2)
	clock = now.Add(29 * time.Minute)
	assert.Len(t, u.Current(), 2, "avoided up to the cap")
	clock = now.Add(30*time.Minute + time.Second)
	assert.Empty(t, u.Current(), "a year's expiry is cut to 30 minutes")
}

// Issue 31, item 5: random names cannot grow the cache without bound: past 4096 offerings a
// new one is refused, with an error saying so.
func TestUnavailableBoundsEntries(t *testing.T) {
	u := NewUnavailable(func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) })
	for i := 0; i < 5000; i++ {
		u.Add(&launchv1.OfferingUnavailable{InstanceType: fmt.Sprintf("x%d.large", i), Zone: "us-east-1a",
			CapacityType: commonv1.CapacityType_CAPACITY_TYPE_SPOT, Ttl: durationpb.New(3 * time.Minute)})
	}
	assert.Equal(t, 4096, len(u.Current()))
	_, err := u.Add(&launchv1.OfferingUnavailable{InstanceType: "one.more", Zone: "us-east-1a", CapacityType: commonv1.CapacityType_CAPACITY_TYPE_SPOT})
	assert.ErrorIs(t, err, ErrRefused)
	_, err = u.Add(&launchv1.OfferingUnavailable{InstanceType: "x1.large", CapacityType: commonv1.CapacityType_CAPACITY_TYPE_SPOT})
	assert.ErrorIs(t, err, ErrRefused, "no zone: not an offering")
}

// Issue 31, item 5: with the published catalog to check against, a message naming an instance
// type the catalog lacks, or a zone or capacity type the type is not offered in, is refused;
// one naming a real offering is kept. Before a catalog is published, offerings pass.
func TestUnavailableChecksTheCatalog(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "catalog"})
	require.NoError(t, err)
	w, err := catalogkv.Watch(ctx, kv)
	require.NoError(t, err)
	<-w.Ready()

	u := NewUnavailable(time.Now)
	u.CheckWith(InCatalog(w))
	spot, od := commonv1.CapacityType_CAPACITY_TYPE_SPOT, commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND
	msg := func(typ, zone string, ct commonv1.CapacityType) *launchv1.OfferingUnavailable {
		return &launchv1.OfferingUnavailable{InstanceType: typ, Zone: zone, CapacityType: ct, Ttl: durationpb.New(time.Minute)}
	}
	kept, err := u.Add(msg("early.large", "us-east-1a", spot))
	require.NoError(t, err)
	assert.True(t, kept, "no catalog yet: kept")

	_, err = catalogkv.Publish(ctx, kv, &catalogv1.Catalog{Region: "us-east-1", InstanceTypes: []*catalogv1.InstanceType{{Name: "m5.large",
		Offerings: []*catalogv1.Offering{{Zone: "us-east-1a", CapacityType: spot, Available: true}}}}})
	require.NoError(t, err)
	// The whole catalog, not just its type: Publish writes the meta entry last, and until it is
	// seen the catalog is incomplete and nothing is checked against it.
	require.Eventually(t, func() bool { _, _, err := w.Catalog(); return err == nil }, 10*time.Second, 10*time.Millisecond)
	for _, c := range []struct {
		name string
		msg  *launchv1.OfferingUnavailable
		ok   bool
	}{
		{"in the catalog", msg("m5.large", "us-east-1a", spot), true},
		{"unknown type", msg("zz9.plural", "us-east-1a", spot), false},
		{"zone not offered", msg("m5.large", "us-east-1z", spot), false},
		{"capacity type not offered", msg("m5.large", "us-east-1a", od), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			kept, err := u.Add(c.msg)
			if c.ok {
				assert.NoError(t, err)
				assert.True(t, kept)
			} else {
				assert.ErrorIs(t, err, ErrRefused)
				assert.False(t, kept)
			}
		})
	}
}
