package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// The drain's deadline counts from the NodeClaim's deletion (deletionTimestamp +
// terminationGracePeriod, or the deadline recorded on it), never from the decision time an
// intent carries; an interruption's own deadline (the warning plus what AWS gives) ends it sooner.
func TestDrainDeadline(t *testing.T) {
	decided := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	deleted := decided.Add(45 * time.Second) // replacements took 45 s to initialize
	now := deleted.Add(5 * time.Second)
	grace := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	claim := func(deleting bool, tgp *metav1.Duration, recorded string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{TerminationGracePeriod: tgp}}
		if deleting {
			nc.DeletionTimestamp = &metav1.Time{Time: deleted}
		}
		if recorded != "" {
			nc.Annotations = map[string]string{karpv1.NodeClaimTerminationTimestampAnnotationKey: recorded}
		}
		return nc
	}
	drift := &terminationv1.TerminationIntent{Reason: commonv1.TerminationReason_TERMINATION_REASON_DRIFTED,
		RequestTime: timestamppb.New(decided), GracePeriod: durationpb.New(20 * time.Second)}
	spot := &terminationv1.TerminationIntent{Reason: commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED,
		RequestTime: timestamppb.New(deleted.Add(-90 * time.Second)), GracePeriod: durationpb.New(2 * time.Minute)}
	cases := []struct {
		name         string
		claim        *karpv1.NodeClaim
		in           *terminationv1.TerminationIntent
		interruption bool
		want         time.Time
	}{
		{name: "drift: from the deletion, not the decision", claim: claim(true, grace(20*time.Second), ""), in: drift,
			want: deleted.Add(20 * time.Second)},
		{name: "the recorded deadline comes first", claim: claim(true, grace(20*time.Second), deleted.Add(time.Minute).Format(time.RFC3339)), in: drift,
			want: deleted.Add(time.Minute)},
		{name: "an unreadable record is ignored", claim: claim(true, grace(20*time.Second), "soon"), in: drift, want: deleted.Add(20 * time.Second)},
		{name: "no terminationGracePeriod: none, whatever the intent says", claim: claim(true, nil, ""), in: drift},
		{name: "a claim not yet deleting has none", claim: claim(false, grace(20*time.Second), ""), in: drift},
		{name: "no claim (a node deleted by hand): none", in: drift},
		{name: "interruption: the warning's deadline, sooner than the claim's", claim: claim(true, grace(10*time.Minute), ""), in: spot, interruption: true,
			want: deleted.Add(30 * time.Second)},
		{name: "interruption: the claim's, sooner than the warning's", claim: claim(true, grace(10*time.Second), ""), in: spot, interruption: true,
			want: deleted.Add(10 * time.Second)},
		{name: "interruption without a claim", in: spot, interruption: true, want: deleted.Add(30 * time.Second)},
		{name: "interruption without a grace period: the claim's", claim: claim(true, grace(time.Minute), ""), interruption: true,
			in: &terminationv1.TerminationIntent{Reason: commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED}, want: deleted.Add(time.Minute)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, drainDeadline(c.claim, c.in, c.interruption, now))
		})
	}

	at, ok := intentDeadline(&terminationv1.TerminationIntent{GracePeriod: durationpb.New(time.Minute)}, now)
	assert.True(t, ok)
	assert.Equal(t, now.Add(time.Minute), at, "an intent without a request time counts from now")
	_, ok = intentDeadline(&terminationv1.TerminationIntent{RequestTime: timestamppb.New(now)}, now)
	assert.False(t, ok, "no grace period, no deadline")
}
