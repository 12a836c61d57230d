package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

// flushOne flushes with no practical size limit: the window is one batch.
func flushOne(b *batcher, now time.Time) (*podsv1.PendingPodBatch, bool) {
	batches, _, ok := b.flush(now, "w", 1<<30)
	if !ok {
		return nil, false
	}
	return batches[0], true
}

func pod(uid string) *podsv1.PodProjection { return &podsv1.PodProjection{Uid: uid, Name: uid} }

func TestBatcherClosesAfterIdle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBatcher(time.Second, 10*time.Second, time.Minute)
	b.add(pod("a"), t0)
	b.add(pod("b"), t0.Add(500*time.Millisecond))
	_, ok := flushOne(b, t0.Add(1400*time.Millisecond))
	assert.False(t, ok, "the second pod extended the idle timer")
	batch, ok := flushOne(b, t0.Add(1500*time.Millisecond))
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
		if got, ok := flushOne(b, now); ok {
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
	_, ok := flushOne(b, t0.Add(time.Second))
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
	batch, ok := flushOne(b, t0.Add(time.Second))
	require.True(t, ok)
	require.Len(t, batch.Pods, 1)
	assert.Equal(t, "b", batch.Pods[0].Uid)
	b.remove("zzz")
	assert.True(t, b.due().IsZero(), "no window open")
}

// A window whose batch would not fit in one message is split into several batches, each
// within the limit, together holding every pod once, each with its own id that another
// replica closing the same window derives alike.
func TestLargeWindowIsSplitIntoBatchesThatFit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	fill := func() *batcher {
		b := newBatcher(time.Second, 10*time.Second, time.Minute)
		for i := range 500 {
			b.add(&podsv1.PodProjection{Uid: fmt.Sprintf("uid-%04d", i), Name: fmt.Sprintf("pod-%04d", i), Namespace: "big"}, t0)
		}
		return b
	}
	const limit = 4096
	batches, tooBig, ok := fill().flush(t0.Add(time.Second), "w", limit)
	require.True(t, ok)
	require.Empty(t, tooBig)
	require.Greater(t, len(batches), 1, "500 pods do not fit in 4 KiB")
	seen := map[string]int{}
	ids := map[string]bool{}
	for _, b := range batches {
		assert.LessOrEqual(t, proto.Size(b), limit)
		assert.NotEmpty(t, b.Pods)
		assert.False(t, ids[b.BatchId], "each batch has its own id")
		ids[b.BatchId] = true
		assert.Equal(t, batches[0].WindowOpenTime.AsTime(), b.WindowOpenTime.AsTime(), "all of one window")
		for _, p := range b.Pods {
			seen[p.Uid]++
		}
	}
	assert.Len(t, seen, 500)
	for uid, n := range seen {
		assert.Equal(t, 1, n, uid)
	}
	again, _, _ := fill().flush(t0.Add(2*time.Second), "w2", limit)
	require.Len(t, again, len(batches))
	for i := range again {
		assert.Equal(t, batches[i].BatchId, again[i].BatchId, "another replica splits the same window alike")
	}

	// A small window is one batch, with the id it always had.
	b := newBatcher(time.Second, 10*time.Second, time.Minute)
	b.add(pod("a"), t0)
	one, _, ok := b.flush(t0.Add(time.Second), "w", limit)
	require.True(t, ok)
	require.Len(t, one, 1)
	assert.Equal(t, batchID([]*podsv1.PodProjection{pod("a")}, t0.Add(time.Second), time.Minute), one[0].BatchId)
}

// A pod whose projection alone exceeds the limit cannot be offered: it is returned apart,
// so the watcher reports it, and the others are still published.
func TestPodLargerThanTheLimitIsSetApart(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBatcher(time.Second, 10*time.Second, time.Minute)
	b.add(pod("small"), t0)
	huge := pod("huge")
	huge.Name = strings.Repeat("x", 5000)
	b.add(huge, t0)
	batches, tooBig, ok := b.flush(t0.Add(time.Second), "w", 4096)
	require.True(t, ok)
	var pods []string
	for _, bt := range batches {
		for _, p := range bt.Pods {
			pods = append(pods, p.Uid)
		}
	}
	assert.Equal(t, []string{"small"}, pods)
	require.Len(t, tooBig, 1)
	assert.Equal(t, "huge", tooBig[0].Uid)
}
