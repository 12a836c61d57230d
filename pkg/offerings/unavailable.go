// Package offerings holds what the services share about EC2 offerings (an instance type in a
// zone at a capacity type): the capacity-type names, what a NodeClaim may launch as (Options,
// and HandMade for a claim made by hand, over the published catalog, Types), and the one cache
// of offerings that ran out of capacity. The launcher publishes an OfferingUnavailable when CreateFleet reports
// InsufficientInstanceCapacity; every replica of the launcher and the scheduler follows
// <prefix>.offerings.unavailable into an Unavailable, from a few minutes back so a restart does
// not forget an offering still to be avoided.
//
//	launcher ──CreateFleet ICE──> publish OfferingUnavailable ──> offerings.unavailable
//	                                                                │ bus.Follow (every replica)
//	scheduler: Solve avoids Current()  <── Unavailable  ──> launcher: overrides skip Set()
package offerings

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/catalogkv"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// DefaultTTL applies to an OfferingUnavailable that names no expiry or TTL.
const DefaultTTL = 3 * time.Minute

// MaxTTL bounds how long one message can have an offering avoided, whatever expiry it names:
// a message that says "a year" (a bug, or someone with a service's credentials) blocks the
// offering for MaxTTL, then it is tried again.
const MaxTTL = 30 * time.Minute

// MaxEntries bounds the offerings avoided at once. EC2 has a few thousand offerings per region;
// more entries than this are names no catalog holds, and are refused.
const MaxEntries = 4096

// capacityTypeNames are the well-known label values of the capacity types ("spot", "on-demand").
var capacityTypeNames = map[commonv1.CapacityType]string{
	commonv1.CapacityType_CAPACITY_TYPE_SPOT:      scheduling.CapacityTypeSpot,
	commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND: scheduling.CapacityTypeOnDemand,
}

// CapacityTypeName is the well-known label value of a capacity type; empty for an unspecified one.
func CapacityTypeName(ct commonv1.CapacityType) string { return capacityTypeNames[ct] }

// CapacityType is the enum of a capacity-type label value; UNSPECIFIED for anything else.
func CapacityType(name string) commonv1.CapacityType {
	for ct, n := range capacityTypeNames {
		if n == name {
			return ct
		}
	}
	return commonv1.CapacityType_CAPACITY_TYPE_UNSPECIFIED
}

// Key names the offering of a message.
func Key(o *launchv1.OfferingUnavailable) scheduling.OfferingKey {
	return scheduling.OfferingKey{InstanceType: o.GetInstanceType(), Zone: o.GetZone(), CapacityType: CapacityTypeName(o.GetCapacityType())}
}

// Unavailable remembers offerings that ran out of capacity until each one expires. It is safe
// for concurrent use.
type Unavailable struct {
	now func() time.Time

	mu      sync.Mutex
	entries map[scheduling.OfferingKey]time.Time // expiry
	known   func(scheduling.OfferingKey) error
}

// NewUnavailable returns an empty cache reading time from now.
func NewUnavailable(now func() time.Time) *Unavailable {
	return &Unavailable{now: now, entries: map[scheduling.OfferingKey]time.Time{}}
}

// CheckWith makes Add refuse an offering known says is not one (InCatalog: not in the
// published catalog).
func (u *Unavailable) CheckWith(known func(scheduling.OfferingKey) error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.known = known
}

// ErrRefused is wrapped by Add's errors: the message names no offering to avoid, or one more
// than the cache holds.
var ErrRefused = errors.New("offering-unavailable message refused")

// InCatalog checks an offering against the published catalog: its instance type must be there
// and offer the zone and capacity type. Until a complete catalog is there (a first start, before
// the launcher's first refresh) every offering passes: the cache is still bounded by MaxEntries
// and MaxTTL.
func InCatalog(w *catalogkv.Watcher) func(scheduling.OfferingKey) error {
	return func(k scheduling.OfferingKey) error {
		if _, _, err := w.Catalog(); err != nil {
			return nil
		}
		it, ok := w.Lookup(k.InstanceType)
		if !ok {
			return fmt.Errorf("%w: instance type %q is not in the catalog", ErrRefused, k.InstanceType)
		}
		for _, o := range it.GetOfferings() {
			if o.GetZone() == k.Zone && CapacityTypeName(o.GetCapacityType()) == k.CapacityType {
				return nil
			}
		}
		return fmt.Errorf("%w: the catalog has no %s offering of %s in zone %q", ErrRefused, k.CapacityType, k.InstanceType, k.Zone)
	}
}

// Follow replays <prefix>.offerings.unavailable from replay ago and then follows it into the
// cache until ctx ends, logging each offering that is newly to be avoided, and each message
// refused (Add) with what it said.
func (u *Unavailable) Follow(ctx context.Context, conn *bus.Conn, replay time.Duration, log zerolog.Logger) error {
	return bus.Follow(ctx, conn, conn.Prefix().Of(subject.OfferingsUnavailable), u.now().Add(-replay),
		func(_ context.Context, o *launchv1.OfferingUnavailable) {
			added, err := u.Add(o)
			l := log.With().Str("instance-type", o.GetInstanceType()).Str("zone", o.GetZone()).
				Str("capacity-type", CapacityTypeName(o.GetCapacityType())).Str("reason", o.GetReason()).Str("nodeclaim", o.GetNodeClaimName()).Logger()
			switch {
			case err != nil:
				l.Warn().Err(err).Msg("ignoring offering-unavailable message")
			case added:
				l.Info().Time("until", u.expiry(o)).Msg("avoiding unavailable offering")
			}
		})
}

// Add records an offering until its expiry (at most MaxTTL from now); it reports whether the
// offering is still to be avoided and was not known to be until then already. It refuses, with
// an error wrapping ErrRefused, a message that names no offering, one CheckWith's check says is
// not one, and a new offering when MaxEntries are avoided already. It forgets expired
// offerings as it goes, so a cache that is fed but rarely read (a launcher without launches)
// stays bounded by the offerings unavailable now.
func (u *Unavailable) Add(o *launchv1.OfferingUnavailable) (bool, error) {
	now := u.now()
	expire := u.expiry(o)
	if !expire.After(now) {
		return false, nil
	}
	key := Key(o)
	if key.InstanceType == "" || key.Zone == "" || key.CapacityType == "" {
		return false, fmt.Errorf("%w: it names no instance type, zone or capacity type", ErrRefused)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if !expire.After(u.entries[key]) {
		return false, nil
	}
	if u.known != nil {
		if err := u.known(key); err != nil {
			return false, err
		}
	}
	u.forgetExpiredLocked(now)
	if _, have := u.entries[key]; !have && len(u.entries) >= MaxEntries {
		return false, fmt.Errorf("%w: %d offerings are avoided already, the most this cache holds", ErrRefused, MaxEntries)
	}
	u.entries[key] = expire
	return true, nil
}

// expiry is Expiry, no later than MaxTTL from now.
func (u *Unavailable) expiry(o *launchv1.OfferingUnavailable) time.Time {
	now := u.now()
	e := Expiry(o, now)
	if limit := now.Add(MaxTTL); e.After(limit) {
		return limit
	}
	return e
}

func (u *Unavailable) forgetExpiredLocked(now time.Time) {
	for k, exp := range u.entries {
		if !exp.After(now) {
			delete(u.entries, k)
		}
	}
}

// Expiry is when the offering may be tried again: its expire time, or its observe time (now if
// unset) plus its TTL (DefaultTTL if unset).
func Expiry(o *launchv1.OfferingUnavailable, now time.Time) time.Time {
	if o.GetExpireTime() != nil {
		return o.GetExpireTime().AsTime()
	}
	observed := now
	if o.GetObserveTime() != nil {
		observed = o.GetObserveTime().AsTime()
	}
	ttl := DefaultTTL
	if o.GetTtl() != nil && o.GetTtl().AsDuration() > 0 {
		ttl = o.GetTtl().AsDuration()
	}
	return observed.Add(ttl)
}

// Current returns the offerings to avoid now, in a stable order, and forgets expired ones.
func (u *Unavailable) Current() []scheduling.OfferingKey {
	return slices.SortedFunc(maps.Keys(u.Set()), func(a, b scheduling.OfferingKey) int {
		return cmp.Or(cmp.Compare(a.InstanceType, b.InstanceType), cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.CapacityType, b.CapacityType))
	})
}

// Set returns the offerings to avoid now, and forgets expired ones.
func (u *Unavailable) Set() map[scheduling.OfferingKey]bool {
	now := u.now()
	u.mu.Lock()
	defer u.mu.Unlock()
	u.forgetExpiredLocked(now)
	out := make(map[scheduling.OfferingKey]bool, len(u.entries))
	for k := range u.entries {
		out[k] = true
	}
	return out
}
