package main

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
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

// flush closes the window if it is due at now, returning its batches: one, unless the pods do
// not fit in one message of maxBytes (the encoded batch), when the window is split into
// several. Pods are split in UID order, so every replica closing the same window splits it
// alike and each part gets the same id everywhere. A pod that alone does not fit is returned
// apart in tooBig: it cannot be offered.
func (b *batcher) flush(now time.Time, watcherID string, maxBytes int) (batches []*podsv1.PendingPodBatch, tooBig []*podsv1.PodProjection, ok bool) {
	due := b.due()
	if due.IsZero() || now.Before(due) {
		return nil, nil, false
	}
	pods := make([]*podsv1.PodProjection, 0, len(b.pods))
	for _, p := range b.pods {
		pods = append(pods, p)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].GetUid() < pods[j].GetUid() })
	mk := func(part []*podsv1.PodProjection) *podsv1.PendingPodBatch {
		return &podsv1.PendingPodBatch{
			BatchId:         batchID(part, now, b.resync),
			WindowOpenTime:  timestamppb.New(b.opened),
			WindowCloseTime: timestamppb.New(now),
			WatcherId:       watcherID,
			Pods:            part,
		}
	}
	// Every batch id has the same length, so the envelope's size is known before the id is.
	envelope := proto.Size(mk(nil))
	size := envelope
	var part []*podsv1.PodProjection
	for _, p := range pods {
		n := protowire.SizeTag(podsField) + protowire.SizeBytes(proto.Size(p))
		if envelope+n > maxBytes {
			tooBig = append(tooBig, p)
			continue
		}
		if size+n > maxBytes {
			batches = append(batches, mk(part))
			part, size = nil, envelope
		}
		part = append(part, p)
		size += n
	}
	if len(part) > 0 {
		batches = append(batches, mk(part))
	}
	b.pods = map[string]*podsv1.PodProjection{}
	return batches, tooBig, true
}

// podsField is the field number of PendingPodBatch.pods.
var podsField = (&podsv1.PendingPodBatch{}).ProtoReflect().Descriptor().Fields().ByName("pods").Number()

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
