package main

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

// batcher collects pending pods into windows the way Karpenter batches them: a window opens
// with the first pod, and closes once no new pod arrived for `idle`, or `max` after it opened.
// It is not safe for concurrent use; the watcher serialises access.
type batcher struct {
	idle, max time.Duration
	resync    time.Duration // epoch length folded into batch ids, see batchID

	pods    map[string]*podsv1.PodProjection // by pod UID
	opened  time.Time
	lastNew time.Time
}

func newBatcher(idle, max, resync time.Duration) *batcher {
	return &batcher{idle: idle, max: max, resync: resync, pods: map[string]*podsv1.PodProjection{}}
}

// add puts a pod in the open window (opening one if needed). A pod already in the window is
// refreshed without extending the idle timer: only new pods keep a window open.
func (b *batcher) add(p *podsv1.PodProjection, now time.Time) {
	if len(b.pods) == 0 {
		b.opened = now
	}
	if _, ok := b.pods[p.GetUid()]; !ok {
		b.lastNew = now
	}
	b.pods[p.GetUid()] = p
}

// remove drops a pod that stopped being pending before the window closed.
func (b *batcher) remove(uid string) { delete(b.pods, uid) }

// has reports whether the pod is in the open window.
func (b *batcher) has(uid string) bool { _, ok := b.pods[uid]; return ok }

// size is the number of pods in the open window.
func (b *batcher) size() int { return len(b.pods) }

// due reports when the open window closes; zero when no window is open.
func (b *batcher) due() time.Time {
	if len(b.pods) == 0 {
		return time.Time{}
	}
	idle := b.lastNew.Add(b.idle)
	max := b.opened.Add(b.max)
	if max.Before(idle) {
		return max
	}
	return idle
}

// flush closes the window if it is due at now, returning the batch.
func (b *batcher) flush(now time.Time, watcherID string) (*podsv1.PendingPodBatch, bool) {
	due := b.due()
	if due.IsZero() || now.Before(due) {
		return nil, false
	}
	pods := make([]*podsv1.PodProjection, 0, len(b.pods))
	for _, p := range b.pods {
		pods = append(pods, p)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].GetUid() < pods[j].GetUid() })
	batch := &podsv1.PendingPodBatch{
		BatchId:         batchID(pods, now, b.resync),
		WindowOpenTime:  timestamppb.New(b.opened),
		WindowCloseTime: timestamppb.New(now),
		WatcherId:       watcherID,
		Pods:            pods,
	}
	b.pods = map[string]*podsv1.PodProjection{}
	return batch, true
}

// batchID is deterministic: the same set of pods closed in the same resync epoch gets the same
// id on every replica, so JetStream's duplicate window drops the copies. A later epoch gets a
// new id, so pods that stay pending are offered to the scheduler again; so does a pod offered
// again because its nomination ended, as the nomination it was released from is part of the id.
func batchID(pods []*podsv1.PodProjection, closed time.Time, epoch time.Duration) string {
	h := sha256.New()
	for _, p := range pods {
		h.Write([]byte(p.GetUid()))
		h.Write([]byte{0})
		if c := p.GetNominatedNodeClaimName(); c != "" {
			h.Write([]byte(c + "@" + p.GetNominatedAt().AsTime().Format(time.RFC3339)))
			h.Write([]byte{0})
		}
	}
	if epoch > 0 {
		n := closed.UnixNano() / int64(epoch)
		h.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24), byte(n >> 32), byte(n >> 40), byte(n >> 48), byte(n >> 56)})
	}
	return "batch-" + hex.EncodeToString(h.Sum(nil))[:24]
}
