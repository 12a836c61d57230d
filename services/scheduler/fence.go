package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/fleetwright/fleetwright/pkg/clock"
)

// errFenced is what a write returns when this replica no longer holds the scheduler Lease, or
// cannot be sure it still does: the work is left to the replica that leads now.
var errFenced = errors.New("not written: this replica no longer holds the scheduler Lease (or its hold is not fresh); the work is left to the new leader")

// leaseHold is this replica's hold on the Lease as its own renewals show it. client-go's
// elector tells when leading starts and stops, but a handler that runs on after the lease is
// lost (a batch handler runs on a context that leadership does not cancel, so it can settle its
// message) must not write once another replica may have taken over. A standby takes over when
// it has seen the lease unchanged for the lease duration, counted from when it read it, which is
// after this replica's last renewal was sent; so this replica's hold is fresh until that send
// plus the renew deadline, the lease duration less a margin of (lease duration − renew
// deadline), the same point at which the elector itself steps down.
type leaseHold struct {
	identity string
	lease    string        // <namespace>/<name> of the Lease
	validFor time.Duration // the renew deadline
	now      func() time.Time

	mu      sync.Mutex
	term    uint64    // counts the times this replica started leading
	leading bool      // between OnStartedLeading and OnStoppedLeading
	renewed time.Time // when the last successful create or renewal of the lease was sent
	// transitions is the Lease's leaseTransitions in this replica's last write of it, and
	// termTransitions its value when the current term began: with the identity, the term as
	// the API server's fence knows it.
	transitions, termTransitions int32
	writes                       uint64 // stamped writes, so each stamp differs from the last
}

func newLeaseHold(identity, lease string, validFor time.Duration) *leaseHold {
	return &leaseHold{identity: identity, lease: lease, validFor: validFor, now: time.Now}
}

// termAnnotation carries, on every NodeClaim the scheduler creates or changes, the Lease term
// the write was made in: <lease namespace>/<lease name>/<holder>/<leaseTransitions>/<write>.
// The API server refuses a write whose term is not the Lease's current one
// (deploy/base/scheduler/fence.yaml), so a deposed leader's write that reaches it late, after
// a standby took over, does not land: the fence holds on the server, not only here.
const termAnnotation = "fleetwright.io/scheduler-term"

// stamp is the term annotation's value for one write of ctx's term.
func (h *leaseHold) stamp(ctx context.Context) string {
	term, _ := ctx.Value(termKey{}).(uint64)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes++
	if term != h.term {
		// An earlier term's work (fence has refused it already): a stamp no Lease matches.
		return fmt.Sprintf("%s/%s/stale/%d", h.lease, h.identity, h.writes)
	}
	return fmt.Sprintf("%s/%s/%d/%d", h.lease, h.identity, h.termTransitions, h.writes)
}

// termRefused reports whether the API server refused a write for its term (the fence policy's
// message).
func termRefused(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "written in scheduler term")
}

// retryTerm makes a stamped write, again for a second at most while the API server refuses its
// term and this replica's hold is fresh: the server's view of the Lease can be a moment behind
// the write that began the term. A deposed replica's hold is not fresh: its refusal is final.
func (s *scheduler) retryTerm(ctx context.Context, write func() error) error {
	for try := 0; ; try++ {
		err := write()
		if err == nil || try == 10 || !termRefused(err) {
			return err
		}
		if _, why := s.lease.until(ctx); why != "" || !clock.Sleep(ctx, 100*time.Millisecond) {
			return err
		}
	}
}

// stampPatch adds the write's term to a merge patch of a NodeClaim's metadata.
func stampPatch(patch []byte, stamp string) ([]byte, error) {
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, fmt.Errorf("stamping patch: %w", err)
	}
	if err := unstructured.SetNestedField(p, stamp, "metadata", "annotations", termAnnotation); err != nil {
		return nil, fmt.Errorf("stamping patch: %w", err)
	}
	return json.Marshal(p)
}

// termKey carries, in the leader's work context, the term it was started for.
type termKey struct{}

// started begins a term and returns the context its work runs with.
func (h *leaseHold) started(ctx context.Context) context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.term++
	h.leading = true
	h.termTransitions = h.transitions
	return context.WithValue(ctx, termKey{}, h.term)
}

func (h *leaseHold) stopped() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leading = false
}

// until reports until when work of ctx's term may write, and why not if it may not now.
func (h *leaseHold) until(ctx context.Context) (time.Time, string) {
	term, _ := ctx.Value(termKey{}).(uint64)
	return h.untilTerm(term)
}

func (h *leaseHold) untilTerm(term uint64) (time.Time, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	until := h.renewed.Add(h.validFor)
	switch {
	case term == 0:
		return time.Time{}, "the work was not started by leading"
	case term != h.term:
		return time.Time{}, fmt.Sprintf("the work belongs to an earlier term (%d, now %d)", term, h.term)
	case !h.leading:
		return time.Time{}, "leadership was lost"
	case !h.now().Before(until):
		return time.Time{}, fmt.Sprintf("the lease was last renewed %s ago, its hold is fresh for %s", h.now().Sub(h.renewed).Round(time.Millisecond), h.validFor)
	}
	return until, ""
}

// lock wraps the elector's lock, noting when each successful write of the lease held by this
// replica was sent.
func (h *leaseHold) lock(l resourcelock.Interface) resourcelock.Interface {
	return &heldLock{Interface: l, h: h}
}

type heldLock struct {
	resourcelock.Interface
	h *leaseHold
}

func (l *heldLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	sent := l.h.now()
	err := l.Interface.Create(ctx, r)
	l.wrote(r, sent, err)
	return err
}

func (l *heldLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	sent := l.h.now()
	err := l.Interface.Update(ctx, r)
	l.wrote(r, sent, err)
	return err
}

func (l *heldLock) wrote(r resourcelock.LeaderElectionRecord, sent time.Time, err error) {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	if err == nil && r.HolderIdentity == l.h.identity && sent.After(l.h.renewed) {
		l.h.renewed = sent
		l.h.transitions = int32(r.LeaderTransitions)
	}
}

// guard returns a context for one write of the term that ends, with cause errFenced, once the
// hold goes stale (renewals while the write is under way keep it going).
func (h *leaseHold) guard(ctx context.Context, term uint64, until time.Time) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancelCause(ctx)
	go func() {
		for {
			t := time.NewTimer(until.Sub(h.now()))
			select {
			case <-wctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			var why string
			if until, why = h.untilTerm(term); why != "" {
				cancel(errFenced)
				return
			}
		}
	}()
	return wctx, func() { cancel(context.Canceled) }
}

// fence is called before every write that creates or changes cluster state (a NodeClaim, a pod's
// nomination, a LaunchIntent, a TerminationIntent, an offering marked unavailable, a disruption
// record). If this replica's hold on the Lease is fresh it returns a context that ends when the
// hold goes stale, so a write that cannot be made in time is abandoned rather than landing after
// a new leader took over; the caller calls done when the write is over. Otherwise it logs, counts
// the write in fleetwright_scheduler_fenced_writes_total and returns errFenced.
func (s *scheduler) fence(ctx context.Context, write string) (context.Context, context.CancelFunc, error) {
	until, why := s.lease.until(ctx)
	if why != "" {
		return ctx, func() {}, s.fenced(write, why)
	}
	term, _ := ctx.Value(termKey{}).(uint64)
	wctx, done := s.lease.guard(ctx, term, until)
	return wctx, done, nil
}

func (s *scheduler) fenced(write, why string) error {
	s.metrics.fenced.WithLabelValues(write).Inc()
	s.rt.Log.Info().Str("write", write).Str("identity", s.cfg.Identity).Str("why", why).
		Msg("not writing: this replica's hold on the scheduler lease is gone or stale; leaving the work to the leader")
	return fmt.Errorf("%s: %w", write, errFenced)
}

// cut turns the error of a write that the fence's deadline cut short (the hold went stale while
// it was under way) into errFenced; other errors are returned as they are.
func (s *scheduler) cut(wctx context.Context, write string, err error) error {
	if err != nil && errors.Is(context.Cause(wctx), errFenced) {
		return s.fenced(write, "the hold went stale while the write was under way: "+err.Error())
	}
	return err
}
