package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

func pod(uid string) *podsv1.PodProjection { return &podsv1.PodProjection{Uid: uid, Name: uid} }

func TestBatcherClosesAfterIdle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBatcher(time.Second, 10*time.Second, time.Minute)
	b.add(pod("a"), t0)
	b.add(pod("b"), t0.Add(500*time.Millisecond))
	_, ok := b.flush(t0.Add(1400*time.Millisecond), "w")
	assert.False(t, ok, "the second pod extended the idle timer")
	batch, ok := b.flush(t0.Add(1500*time.Millisecond), "w")
	require.True(t, ok)
	assert.Len(t, batch.Pods, 2)
	assert.Equal(t, "a", batch.Pods[0].Uid)
	assert.Equal(t, 0, b.size(), "flushing empties the window")
}

func TestBatcherClosesAtMaxEvenWhilePodsKeepArriving(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBatcher(time.Second, 10*time.Second, time.Minute)
	var batch *podsv1.PendingPodBatch
	for i := 0; i < 40; i++ {
		now := t0.Add(time.Duration(i) * 300 * time.Millisecond)
		if got, ok := b.flush(now, "w"); ok {
			batch = got
			break
		}
		b.add(pod(string(rune('a'+i%26))+string(rune('a'+i/26))), now)
	}
	require.NotNil(t, batch, "a window never stays open past max")
	closed := batch.WindowCloseTime.AsTime()
	assert.False(t, closed.Before(t0.Add(10*time.Second)), "not before the 10 s max")
	assert.True(t, closed.Before(t0.Add(10300*time.Millisecond)), "at the first check after the 10 s max")
	assert.Len(t, batch.Pods, 34, "every pod that arrived in the window")
}

func TestBatcherRefreshDoesNotExtendIdle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBatcher(time.Second, 10*time.Second, time.Minute)
	b.add(pod("a"), t0)
	b.add(pod("a"), t0.Add(900*time.Millisecond)) // an update of the same pod
	_, ok := b.flush(t0.Add(time.Second), "w")
	assert.True(t, ok)
}

func TestBatchIDIsDeterministicPerEpoch(t *testing.T) {
	t0 := time.Unix(6000, 0)
	mk := func(uids ...string) []*podsv1.PodProjection {
		var ps []*podsv1.PodProjection
		for _, u := range uids {
			ps = append(ps, pod(u))
		}
		return ps
	}
	// Two replicas closing windows over the same pods a moment apart agree.
	a := batchID(mk("x", "y"), t0.Add(time.Second), time.Minute)
	b := batchID(mk("x", "y"), t0.Add(3*time.Second), time.Minute)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, batchID(mk("x"), t0, time.Minute), "other pods, other id")
	assert.NotEqual(t, a, batchID(mk("x", "y"), t0.Add(2*time.Minute), time.Minute), "a later epoch re-offers the same pods")

	// A pod released from a nomination within the same epoch is a new offer, each time.
	released := func(claim string, at time.Time) []*podsv1.PodProjection {
		ps := mk("x", "y")
		ps[0].NominatedNodeClaimName, ps[0].NominatedAt = claim, timestamppb.New(at)
		return ps
	}
	first := batchID(released("claim-a", t0), t0.Add(time.Second), time.Minute)
	assert.NotEqual(t, a, first, "released from claim-a")
	assert.Equal(t, first, batchID(released("claim-a", t0), t0.Add(3*time.Second), time.Minute), "replicas still agree")
	assert.NotEqual(t, first, batchID(released("claim-a", t0.Add(20*time.Second)), t0.Add(time.Second), time.Minute),
		"released again from a later nomination to the same claim")
}

func TestRemoveDropsPodFromWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBatcher(time.Second, 10*time.Second, time.Minute)
	b.add(pod("a"), t0)
	b.add(pod("b"), t0)
	b.remove("a")
	batch, ok := b.flush(t0.Add(time.Second), "w")
	require.True(t, ok)
	require.Len(t, batch.Pods, 1)
	assert.Equal(t, "b", batch.Pods[0].Uid)
	b.remove("zzz")
	assert.True(t, b.due().IsZero(), "no window open")
}
