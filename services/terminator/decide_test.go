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

// node is a fixture: an initialized, empty node of pool "default" launched at t0, whose pool
// empties nodes after 30s and never expires them; opts change it.
func node(opts ...func(*candidate)) candidate {
	ttl := 30 * time.Second
	c := candidate{claimRef: claimRef{Name: "default-a", UID: "uid-a", NodeName: "ip-1", InstanceID: "i-1", Pool: "default"},
		Created: t0, Initialized: true, HasNode: true, Empty: true, EmptyAfter: &ttl}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func emptySince(t time.Time) func(*candidate) { return func(c *candidate) { c.EmptySince = t } }
func busy(c *candidate)                       { c.Empty = false }
func expireAfter(d time.Duration) func(*candidate) {
	return func(c *candidate) { c.ExpireAfter = &d }
}
func blockedBy(what string) func(*candidate) { return func(c *candidate) { c.BlockedBy = what } }

func TestDecide(t *testing.T) {
	cases := []struct {
		name   string
		c      candidate
		now    time.Time
		want   actionKind // 0: nothing
		id     string
		reason commonv1.TerminationReason
	}{
		{"newly empty node gets its TTL", node(), t0.Add(time.Minute), markEmpty, "", 0},
		{"empty, TTL not reached", node(emptySince(t0)), t0.Add(29 * time.Second), 0, "", 0},
		{"empty for the TTL", node(emptySince(t0)), t0.Add(30 * time.Second), terminate, "uid-a/empty/" + itoa(t0.Unix()), commonv1.TerminationReason_TERMINATION_REASON_EMPTY},
		{"a pod arrived: the clock resets", node(emptySince(t0), busy), t0.Add(time.Hour), unmarkEmpty, "", 0},
		{"busy and never marked", node(busy), t0.Add(time.Hour), 0, "", 0},
		{"pool without emptiness policy", node(func(c *candidate) { c.EmptyAfter = nil }), t0.Add(time.Hour), 0, "", 0},
		{"not initialized yet", node(func(c *candidate) { c.Initialized = false }), t0.Add(time.Hour), 0, "", 0},
		{"already being disrupted", node(emptySince(t0), func(c *candidate) { c.Disrupting = true }), t0.Add(time.Hour), 0, "", 0},
		{"empty but the node is do-not-disrupt", node(emptySince(t0), blockedBy("node ip-1")), t0.Add(time.Minute), blocked, "", 0},
		{"a replacement waiting for the pods of the node it replaces is not empty", node(func(c *candidate) { c.Replacing = true }), t0.Add(time.Hour), 0, "", 0},
		{"a replacement marked empty before it waited is unmarked", node(emptySince(t0), func(c *candidate) { c.Replacing = true }), t0.Add(time.Hour), unmarkEmpty, "", 0},
		{"expired", node(busy, expireAfter(time.Hour)), t0.Add(time.Hour), terminate, "uid-a/expired", commonv1.TerminationReason_TERMINATION_REASON_EXPIRED},
		{"not expired yet", node(busy, expireAfter(time.Hour)), t0.Add(59 * time.Minute), 0, "", 0},
		{"expired but a do-not-disrupt pod holds it", node(busy, expireAfter(time.Hour), blockedBy("pod default/keep")), t0.Add(2 * time.Hour), blocked, "", 0},
		{"expiry wins over emptiness", node(emptySince(t0), expireAfter(time.Minute)), t0.Add(time.Hour), terminate, "uid-a/expired", commonv1.TerminationReason_TERMINATION_REASON_EXPIRED},
		{"expired claim without a node still goes", node(busy, expireAfter(time.Minute), func(c *candidate) { c.HasNode = false }), t0.Add(time.Hour), terminate, "uid-a/expired", commonv1.TerminationReason_TERMINATION_REASON_EXPIRED},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := decide([]candidate{tc.c}, nil, tc.now)
			if tc.want == 0 {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Equal(t, tc.want, got[0].Kind)
			if tc.want == terminate {
				in := got[0].Intent
				assert.Equal(t, tc.id, in.GetIntentId())
				assert.Equal(t, tc.reason, in.GetReason())
				assert.Equal(t, "default-a", in.GetNodeClaimName())
				assert.Equal(t, "i-1", in.GetInstanceId())
			}
		})
	}
}

// Two replicas deciding about the same node at different moments publish the same intent id,
// so JetStream keeps one; a new emptiness period gets a new id.
func TestEmptinessIntentIDIsDeterministic(t *testing.T) {
	c := node(emptySince(t0))
	a := decide([]candidate{c}, nil, t0.Add(31*time.Second))
	b := decide([]candidate{c}, nil, t0.Add(45*time.Second))
	require.Len(t, a, 1)
	require.Len(t, b, 1)
	assert.Equal(t, a[0].Intent.GetIntentId(), b[0].Intent.GetIntentId())
	assert.True(t, a[0].Intent.GetVoluntary())
	assert.Equal(t, "triggering termination after 30s for empty node", a[0].Why)

	later := decide([]candidate{node(emptySince(t0.Add(time.Hour)))}, nil, t0.Add(2*time.Hour))
	require.Len(t, later, 1)
	assert.NotEqual(t, a[0].Intent.GetIntentId(), later[0].Intent.GetIntentId())
}

func TestGracePeriodTravels(t *testing.T) {
	g := 5 * time.Minute
	got := decide([]candidate{node(emptySince(t0), func(c *candidate) { c.Grace = &g })}, nil, t0.Add(time.Minute))
	require.Len(t, got, 1)
	assert.Equal(t, g, got[0].Intent.GetGracePeriod().AsDuration())
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// The decider is woken at the first moment its stages would decide otherwise by the clock
// alone; deadlines already past, and those of claims being disrupted, do not wake it.
func TestNextDeadline(t *testing.T) {
	now := t0.Add(10 * time.Second)
	cases := []struct {
		name  string
		cands []candidate
		want  time.Time
	}{
		{"nothing timed", []candidate{node(busy)}, time.Time{}},
		{"an empty node's TTL", []candidate{node(emptySince(t0))}, t0.Add(30 * time.Second)},
		{"an empty node not marked yet: its marking is a change", []candidate{node()}, time.Time{}},
		{"a busy node's old mark is no deadline", []candidate{node(busy, emptySince(t0))}, time.Time{}},
		{"a TTL already past is not one", []candidate{node(emptySince(t0.Add(-time.Hour)), blockedBy("node ip-1"))}, time.Time{}},
		{"expiry", []candidate{node(busy, expireAfter(time.Hour))}, t0.Add(time.Hour)},
		{"registration", []candidate{node(busy, func(c *candidate) { c.RegisterBy = t0.Add(15 * time.Minute) })}, t0.Add(15 * time.Minute)},
		{"a nomination running out", []candidate{node(busy, func(c *candidate) { c.AwaitedUntil = t0.Add(20 * time.Second) })}, t0.Add(20 * time.Second)},
		{"the earliest of several", []candidate{node(busy, expireAfter(time.Hour)), node(emptySince(t0), expireAfter(2*time.Hour))}, t0.Add(30 * time.Second)},
		{"a disrupting claim has none", []candidate{node(emptySince(t0), func(c *candidate) { c.Disrupting = true })}, time.Time{}},
		{"a replacement waiting for pods has none", []candidate{node(emptySince(t0), func(c *candidate) { c.Replacing = true })}, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, nextDeadline(tc.cands, now))
		})
	}
}
