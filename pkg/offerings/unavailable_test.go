package offerings

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fleetwright/fleetwright/pkg/scheduling"
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
			assert.Equal(t, tt.kept, u.Add(tt.msg))
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
		assert.True(t, u.Add(&launchv1.OfferingUnavailable{InstanceType: fmt.Sprintf("t%d", i), Zone: "z1",
			CapacityType: commonv1.CapacityType_CAPACITY_TYPE_SPOT, Ttl: durationpb.New(3 * time.Minute)}))
		clock = clock.Add(time.Minute)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	assert.Equal(t, 3, len(u.entries), "only the offerings added within the last TTL are held")
}
