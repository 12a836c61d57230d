package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// launched is a fixture: a claim of pool "default" whose node must register by t0+15m.
func launched(opts ...func(*candidate)) candidate {
	c := candidate{claimRef: claimRef{Name: "default-a", UID: "uid-a", InstanceID: "i-1", Pool: "default"}, RegisterBy: t0.Add(15 * time.Minute)}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// A claim whose node never registered is terminated at its deadline, once; one that registered
// (no deadline) or is being deleted is not.
func TestLiveness(t *testing.T) {
	cases := []struct {
		name string
		c    candidate
		now  time.Time
		want bool
	}{
		{"before the deadline", launched(), t0.Add(14 * time.Minute), false},
		{"at the deadline", launched(), t0.Add(15 * time.Minute), true},
		{"registered: no deadline", launched(func(c *candidate) { c.RegisterBy = time.Time{} }), t0.Add(time.Hour), false},
		{"being deleted", launched(func(c *candidate) { c.Disrupting = true }), t0.Add(time.Hour), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := decide([]candidate{tc.c}, tc.now)
			if !tc.want {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			in := got[0].Intent
			assert.Equal(t, "uid-a/registration-timeout", in.GetIntentId())
			assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_REGISTRATION_TIMEOUT, in.GetReason())
			assert.Equal(t, "default-a", in.GetNodeClaimName())
			assert.Equal(t, "i-1", in.GetInstanceId())
		})
	}
}

// The decider is woken at the first registration deadline still ahead; deadlines past, and those
// of claims being deleted, do not wake it.
func TestNextDeadline(t *testing.T) {
	now := t0.Add(10 * time.Second)
	cases := []struct {
		name  string
		cands []candidate
		want  time.Time
	}{
		{"nothing timed", []candidate{launched(func(c *candidate) { c.RegisterBy = time.Time{} })}, time.Time{}},
		{"registration", []candidate{launched()}, t0.Add(15 * time.Minute)},
		{"the earliest of several", []candidate{launched(), launched(func(c *candidate) { c.RegisterBy = t0.Add(time.Minute) })}, t0.Add(time.Minute)},
		{"a deadline past is not one", []candidate{launched(func(c *candidate) { c.RegisterBy = t0 })}, time.Time{}},
		{"a claim being deleted has none", []candidate{launched(func(c *candidate) { c.Disrupting = true })}, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, nextDeadline(tc.cands, now))
		})
	}
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
