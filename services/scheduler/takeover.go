package main

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

// takeover offers, in one solve, every pod that is pending and not nominated to a live claim,
// as soon as this replica leads: a new leader, or one restarted after a crash, does at once what
// pod-watcher's resync would do only later, and the pods a dead leader was working on are packed
// together again rather than one by one as their batches come back. Claims the dead leader made
// before it could nominate their pods are in-flight capacity here, so those pods go to them.
// The batches it left unacked come back afterwards and find their pods nominated.
func (s *scheduler) takeover(ctx context.Context) {
	now := s.now()
	batch := &podsv1.PendingPodBatch{
		BatchId:   fmt.Sprintf("takeover-%s-%d", s.cfg.Identity, now.Unix()),
		WatcherId: s.cfg.Identity, WindowOpenTime: timestamppb.New(now), WindowCloseTime: timestamppb.New(now),
	}
	for _, p := range s.cluster.Unbound() {
		if pending, _, _ := s.cfg.Early.Pending(p, s.now()); pending && !s.nomination(p).Live {
			batch.Pods = append(batch.Pods, podproj.Project(p, s.cluster.Volumes))
		}
	}
	log := s.rt.Log.With().Str("batch", batch.GetBatchId()).Logger()
	defer func() {
		if err := s.publishInherited(ctx); err != nil && ctx.Err() == nil {
			// Nothing is lost: the reconcile loop publishes them later.
			log.Warn().Err(err).Msg("publishing the launch intents of the previous leader's claims failed; the reconcile loop will")
		}
	}()
	if len(batch.Pods) == 0 {
		log.Info().Msg("leading; no pending pod waits for capacity")
		return
	}
	log.Info().Int("pods", len(batch.Pods)).Msg("leading; offering every pending pod without a live nomination at once")
	s.metrics.takeoverPods.Add(float64(len(batch.Pods)))
	if err := s.handle(ctx, batch, bus.Delivery{Subject: "takeover", MsgID: batch.BatchId, Attempt: 1}); err != nil && ctx.Err() == nil {
		// Nothing is lost: pod-watcher offers the pods again at its next resync.
		log.Warn().Err(err).Msg("scheduling the pending pods at takeover failed; pod-watcher's resync offers them again")
	}
}
