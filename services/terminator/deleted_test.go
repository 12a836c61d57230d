package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// A resumed intent carries the reason of the intent that deleted the claim, and an id fixed by
// the last progress, so every pass and replica publishes the same one.
func TestResumedIntent(t *testing.T) {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a", Annotations: map[string]string{intentAnnotation: "uid-a/interrupted"}}}
	in := resumedIntent(nc, t0, t0.Add(time.Hour))
	assert.Equal(t, "uid-a/interrupted/resumed/"+itoa(t0.Unix()), in.GetIntentId())
	assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED, in.GetReason())
	assert.Equal(t, in.GetIntentId(), resumedIntent(nc, t0, t0.Add(2*time.Hour)).GetIntentId(), "the same id until progress is made")

	nc.Annotations[intentAnnotation] = "uid-a/deleted"
	assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_MANUAL, resumedIntent(nc, t0, t0).GetReason())
	nc.Annotations[intentAnnotation] = in.GetIntentId() // a resumed one resumed again keeps its reason
	assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED, resumedIntent(nc, t0, t0).GetReason())
}

// A resumed intent gives way to another intent that records progress on the claim, so a false
// alarm (an intent only slow to be delivered) does not drain the node twice over; once that
// progress is stale, or for an intent that is not a resumed one, it goes ahead.
func TestResumedIntentSuperseded(t *testing.T) {
	ex := &executor{resumeAfter: time.Minute, now: func() time.Time { return t0 }}
	deleting := metav1.NewTime(t0.Add(-time.Hour))
	claim := func(owner string, progress time.Time) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", DeletionTimestamp: &deleting,
			Annotations: map[string]string{intentAnnotation: owner, progressAnnotation: progress.UTC().Format(time.RFC3339)}}}
	}
	resumed := &terminationv1.TerminationIntent{IntentId: "uid-a/expired/resumed/1"}
	assert.True(t, ex.superseded(claim("uid-a/expired", t0.Add(-10*time.Second)), resumed))
	assert.False(t, ex.superseded(claim("uid-a/expired", t0.Add(-2*time.Minute)), resumed), "the other intent stopped")
	assert.False(t, ex.superseded(claim(resumed.GetIntentId(), t0), resumed), "it is the one at work")
	assert.False(t, ex.superseded(claim("uid-a/expired/resumed/1", t0), &terminationv1.TerminationIntent{IntentId: "uid-a/interrupted"}),
		"an intent of its own goes ahead")
}

// Interruptions' intents, resumed ones included, go on the urgent subject; every other reason
// on the intents subject.
func TestIntentSubject(t *testing.T) {
	p := subject.Prefix("fw")
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a", Annotations: map[string]string{intentAnnotation: "uid-a/interrupted"}}}
	assert.Equal(t, "fw.terminations.urgent", intentSubject(p, resumedIntent(nc, t0, t0.Add(time.Hour))), "a resumed interruption stays urgent")
	for r := range commonv1.TerminationReason_name {
		in := &terminationv1.TerminationIntent{Reason: commonv1.TerminationReason(r)}
		want := "fw.terminations.intents"
		if in.GetReason() == commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED {
			want = "fw.terminations.urgent"
		}
		assert.Equal(t, want, intentSubject(p, in), in.GetReason().String())
	}
}
