package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/fleetwright/fleetwright/pkg/scheduling"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// defaultUnavailableTTL applies to an OfferingUnavailable that names no expiry.
const defaultUnavailableTTL = 3 * time.Minute

// unavailable remembers offerings the launcher could not buy (InsufficientInstanceCapacity and
// the like) until each one expires. Every replica follows <prefix>.offerings.unavailable with
// its own ordered consumer that starts a few minutes back, so a restart does not forget an
// offering that is still to be avoided.
type unavailable struct {
	now func() time.Time

	mu      sync.Mutex
	entries map[scheduling.OfferingKey]time.Time // expiry
	seen    int
}

func newUnavailable(now func() time.Time) *unavailable {
	return &unavailable{now: now, entries: map[scheduling.OfferingKey]time.Time{}}
}

// follow replays the subject from now-replay and then follows it until ctx ends.
func (u *unavailable) follow(ctx context.Context, js jetstream.JetStream, subj string, replay time.Duration, log zerolog.Logger) error {
	stream, err := js.StreamNameBySubject(ctx, subj)
	if err != nil {
		return fmt.Errorf("finding stream for %s: %w", subj, err)
	}
	start := u.now().Add(-replay)
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subj}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start,
	})
	if err != nil {
		return fmt.Errorf("following %s: %w", subj, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var o launchv1.OfferingUnavailable
		if err := proto.Unmarshal(m.Data(), &o); err != nil {
			log.Warn().Err(err).Str("subject", m.Subject()).Msg("skipping undecodable unavailable offering")
			return
		}
		if u.add(&o) {
			log.Info().Str("instance-type", o.GetInstanceType()).Str("zone", o.GetZone()).
				Str("capacity-type", capacityTypeName(o.GetCapacityType())).Str("reason", o.GetReason()).
				Msg("avoiding unavailable offering")
		}
	})
	if err != nil {
		return fmt.Errorf("following %s: %w", subj, err)
	}
	go func() {
		<-ctx.Done()
		cc.Stop()
	}()
	return nil
}

// add records an offering; it reports whether the offering is still to be avoided.
func (u *unavailable) add(o *launchv1.OfferingUnavailable) bool {
	expire := u.expiry(o)
	if !expire.After(u.now()) {
		return false
	}
	key := scheduling.OfferingKey{InstanceType: o.GetInstanceType(), Zone: o.GetZone(), CapacityType: capacityTypeName(o.GetCapacityType())}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seen++
	if expire.After(u.entries[key]) {
		u.entries[key] = expire
	}
	return true
}

func (u *unavailable) expiry(o *launchv1.OfferingUnavailable) time.Time {
	if o.GetExpireTime() != nil {
		return o.GetExpireTime().AsTime()
	}
	observed := u.now()
	if o.GetObserveTime() != nil {
		observed = o.GetObserveTime().AsTime()
	}
	ttl := defaultUnavailableTTL
	if o.GetTtl() != nil && o.GetTtl().AsDuration() > 0 {
		ttl = o.GetTtl().AsDuration()
	}
	return observed.Add(ttl)
}

// current returns the offerings to avoid now, in a stable order, and forgets expired ones.
func (u *unavailable) current() []scheduling.OfferingKey {
	now := u.now()
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]scheduling.OfferingKey, 0, len(u.entries))
	for k, exp := range u.entries {
		if !exp.After(now) {
			delete(u.entries, k)
			continue
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.InstanceType != b.InstanceType {
			return a.InstanceType < b.InstanceType
		}
		if a.Zone != b.Zone {
			return a.Zone < b.Zone
		}
		return a.CapacityType < b.CapacityType
	})
	return out
}
