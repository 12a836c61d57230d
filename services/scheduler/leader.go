package main

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/fleetwright/fleetwright/pkg/clock"
)

// leaseName is the Lease the scheduler's replicas compete for.
const leaseName = "fleetwright-scheduler"

// lead runs work while this replica holds the Lease, and campaigns again after losing it,
// until ctx ends. A standby stays ready but idle. work gets a context that ends when the
// lease is lost; lead waits for it to return before campaigning again.
func (s *scheduler) lead(ctx context.Context, work func(ctx context.Context)) error {
	// The lock notes each renewal this replica makes, so its writes are fenced by the hold
	// (fence.go), not only by the elector's callbacks.
	lock := s.lease.lock(&resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: leaseName, Namespace: s.cfg.Namespace},
		Client:     s.rt.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: s.cfg.Identity},
	})
	for ctx.Err() == nil {
		// Work that returns while the lease is held (its consumer stopped) gives the lease up,
		// so this replica campaigns again and another can take over, rather than holding it idle.
		lctx, release := context.WithCancel(ctx)
		var working sync.WaitGroup
		// Not ReleaseOnCancel: client-go then tries to release the Lease after a renewal failed,
		// for up to another RenewDeadline, and only then ends the work's context — so a leader
		// whose renewals stall keeps working after a standby took the Lease over (at
		// LeaseDuration): two leaders at once. Without it the work ends the moment renewing
		// fails, before the Lease can expire; giving the Lease up on a stop is done below.
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          lock,
			LeaseDuration: s.cfg.LeaseDuration,
			RenewDeadline: s.cfg.RenewDeadline,
			RetryPeriod:   s.cfg.RetryPeriod,
			Name:          leaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					s.metrics.leader.Set(1)
					s.rt.Log.Info().Str("lease", s.cfg.Namespace+"/"+leaseName).Str("identity", s.cfg.Identity).Msg("acquired lease; scheduling")
					working.Add(1)
					defer working.Done()
					defer release()
					work(s.lease.started(lctx))
				},
				OnStoppedLeading: func() {
					s.lease.stopped()
					s.metrics.leader.Set(0)
					s.metrics.karp.stoppedLeading()
					s.rt.Log.Info().Str("identity", s.cfg.Identity).Msg("not leading; standing by")
				},
				OnNewLeader: func(id string) {
					if id != s.cfg.Identity {
						s.rt.Log.Info().Str("leader", id).Msg("standing by")
					}
				},
			},
		})
		if err != nil {
			release()
			return fmt.Errorf("configuring leader election: %w", err)
		}
		le.Run(lctx) // returns when leadership is lost, work returns, or ctx ends
		working.Wait()
		if lctx.Err() != nil {
			// Stopped on purpose (shutting down, or the work returned), not lost: hand the Lease
			// over now rather than make a standby wait LeaseDuration for it.
			s.releaseLease(ctx, lock)
		}
		release()
		clock.Sleep(ctx, s.cfg.RetryPeriod) // no tight loop when work cannot get going
	}
	return nil
}

// releaseLease gives the Lease up if this replica still holds it, as client-go's
// ReleaseOnCancel does: no holder, a one-second duration, so a standby takes it at once.
func (s *scheduler) releaseLease(ctx context.Context, lock resourcelock.Interface) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RenewDeadline)
	defer cancel()
	rec, _, err := lock.Get(rctx)
	if err != nil || rec.HolderIdentity != s.cfg.Identity {
		return
	}
	now := metav1.Now()
	released := resourcelock.LeaderElectionRecord{LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1,
		RenewTime: now, AcquireTime: now}
	if err := lock.Update(rctx, released); err != nil {
		s.rt.Log.Warn().Err(err).Msg("giving up the lease; a standby takes it when it expires")
	}
}
