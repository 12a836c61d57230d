package catalogkv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

func it(name string, price float64) *catalogv1.InstanceType {
	return &catalogv1.InstanceType{Name: name, Vcpu: 2, MemoryMib: 8192, Offerings: []*catalogv1.Offering{
		{Zone: "us-east-1a", CapacityType: commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND, PriceUsdPerHour: price, Available: true}}}
}

// newBucket starts a server and creates the catalog bucket on it.
func newBucket(t *testing.T) (context.Context, jetstream.KeyValue) {
	_, js := bustest.Connect(t, bustest.RunServer(t).ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "fleetwright-catalog"})
	require.NoError(t, err)
	return ctx, kv
}

func TestPublishAndWatch(t *testing.T) {
	ctx, kv := newBucket(t)

	w, err := Watch(ctx, kv)
	require.NoError(t, err)
	<-w.Ready()
	_, _, err = w.Catalog()
	assert.ErrorIs(t, err, ErrEmpty)

	n, err := Publish(ctx, kv, &catalogv1.Catalog{Region: "us-east-1", InstanceTypes: []*catalogv1.InstanceType{it("m5.large", 0.096), it("c5.large", 0.085)}})
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	require.Eventually(t, func() bool {
		c, _, err := w.Catalog()
		return err == nil && len(c.InstanceTypes) == 2 && c.Region == "us-east-1"
	}, 5*time.Second, 10*time.Millisecond)
	c, v, _ := w.Catalog()
	assert.Equal(t, "c5.large", c.InstanceTypes[0].Name, "sorted by name")
	again, v2, _ := w.Catalog()
	assert.Equal(t, v, v2)
	assert.Same(t, c, again, "no update, no rebuild: the same snapshot is handed out")

	// Republishing the same catalog writes nothing; a price change writes one key; a type that
	// is gone is deleted.
	n, err = Publish(ctx, kv, &catalogv1.Catalog{Region: "us-east-1", InstanceTypes: []*catalogv1.InstanceType{it("m5.large", 0.096), it("c5.large", 0.085)}})
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	n, err = Publish(ctx, kv, &catalogv1.Catalog{Region: "us-east-1", InstanceTypes: []*catalogv1.InstanceType{it("m5.large", 0.1)}})
	require.NoError(t, err)
	assert.Equal(t, 2, n, "one price change, one delete")
	require.Eventually(t, func() bool {
		c, _, err := w.Catalog()
		return err == nil && len(c.InstanceTypes) == 1 && c.InstanceTypes[0].Offerings[0].PriceUsdPerHour == 0.1
	}, 5*time.Second, 10*time.Millisecond)
	m5, ok := w.Lookup("m5.large")
	require.True(t, ok)
	assert.Equal(t, 0.1, m5.Offerings[0].PriceUsdPerHour)
	_, ok = w.Lookup("c5.large")
	assert.False(t, ok, "a type no longer offered is not found")

	// A garbage value is counted and skipped.
	_, err = kv.Put(ctx, "types.bogus", []byte{0xff, 0xff})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return w.Errors() == 1 }, 5*time.Second, 10*time.Millisecond)
	c, _, _ = w.Catalog()
	assert.Len(t, c.InstanceTypes, 1)
}

// A catalog whose meta has not been written yet (a first publish under way) is not handed out.
func TestWatcherWaitsForACompleteCatalog(t *testing.T) {
	ctx, kv := newBucket(t)
	b, err := proto.Marshal(it("m5.large", 0.096))
	require.NoError(t, err)
	_, err = kv.Put(ctx, "types.m5.large", b) // a publish cut short before meta
	require.NoError(t, err)

	w, err := Watch(ctx, kv)
	require.NoError(t, err)
	<-w.Ready()
	_, _, err = w.Catalog()
	assert.ErrorIs(t, err, ErrEmpty, "no meta yet: the catalog may be partial")

	_, err = Publish(ctx, kv, &catalogv1.Catalog{Region: "us-east-1", InstanceTypes: []*catalogv1.InstanceType{it("m5.large", 0.096), it("c5.large", 0.085)}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { c, _, err := w.Catalog(); return err == nil && len(c.InstanceTypes) == 2 }, 5*time.Second, 10*time.Millisecond)
}
