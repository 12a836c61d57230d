package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	interruptionv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/interruption/v1"
)

// The four EventBridge shapes of shared/AWS-WIRE.md, and what Fleetwright makes of them.
func TestParseNotice(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		body string
		want notice
	}{
		{"spot interruption warning",
			`{"version":"0","id":"1e5527d7-a","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":"2026-01-01T00:00:00Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"],"detail":{"instance-id":"i-0b662ef9931388ba0","instance-action":"terminate"}}`,
			notice{Kind: commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION, EventID: "1e5527d7-a", Source: "aws.ec2",
				DetailType: "EC2 Spot Instance Interruption Warning", Time: t0, InstanceIDs: []string{"i-0b662ef9931388ba0"}, State: "terminate"}},
		{"rebalance recommendation is recorded, not acted on",
			`{"version":"0","id":"5d5555d5-b","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"i-0b662ef9931388ba0"}}`,
			notice{Kind: commonv1.InterruptionKind_INTERRUPTION_KIND_REBALANCE_RECOMMENDATION, EventID: "5d5555d5-b", Source: "aws.ec2",
				DetailType: "EC2 Instance Rebalance Recommendation", Time: t0, InstanceIDs: []string{"i-0b662ef9931388ba0"}}},
		{"state change to stopping",
			`{"version":"0","id":"7bf73129-c","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"i-abcd1111","state":"stopping"}}`,
			notice{Kind: commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE, EventID: "7bf73129-c", Source: "aws.ec2",
				DetailType: "EC2 Instance State-change Notification", Time: t0, InstanceIDs: []string{"i-abcd1111"}, State: "stopping"}},
		{"state change to running is no reason to drain",
			`{"version":"0","id":"7bf73129-d","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"i-abcd1111","state":"running"}}`,
			notice{Kind: commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE, EventID: "7bf73129-d", Source: "aws.ec2",
				DetailType: "EC2 Instance State-change Notification", Time: t0, InstanceIDs: []string{"i-abcd1111"}, State: "running"}},
		{"health scheduled change for two instances",
			`{"version":"0","id":"7fb65329-e","detail-type":"AWS Health Event","source":"aws.health","time":"2026-01-01T00:00:00Z","resources":["i-12345678"],"detail":{"service":"EC2","eventTypeCategory":"scheduledChange","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","affectedEntities":[{"entityValue":"i-12345678"},{"entityValue":"i-87654321"}]}}`,
			notice{Kind: commonv1.InterruptionKind_INTERRUPTION_KIND_SCHEDULED_CHANGE, EventID: "7fb65329-e", Source: "aws.health",
				DetailType: "AWS Health Event", Time: t0, InstanceIDs: []string{"i-12345678", "i-87654321"}, HealthCode: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"}},
		{"health event of another service is not ours",
			`{"version":"0","id":"x","detail-type":"AWS Health Event","source":"aws.health","time":"2026-01-01T00:00:00Z","detail":{"service":"RDS","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"db-1"}]}}`,
			notice{EventID: "x", Source: "aws.health", DetailType: "AWS Health Event", Time: t0}},
		{"unknown detail-type is ignored",
			`{"version":"0","id":"u1","detail-type":"EC2 AMI State Change","source":"aws.ec2","time":"2026-01-01T00:00:00Z","detail":{}}`,
			notice{EventID: "u1", Source: "aws.ec2", DetailType: "EC2 AMI State Change", Time: t0}},
		{"unknown version is ignored",
			`{"version":"1","id":"u2","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"i-1"}}`,
			notice{EventID: "u2", Source: "aws.ec2", DetailType: "EC2 Spot Instance Interruption Warning", Time: t0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseNotice(tc.body)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseNoticeMalformed(t *testing.T) {
	for _, body := range []string{
		`not json`,
		`{"version":"0","id":"m","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-01-01T00:00:00Z","detail":"oops"}`,
		`{"version":"0","id":"m","detail-type":"AWS Health Event","source":"aws.health","time":"2026-01-01T00:00:00Z","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[]}}`,
	} {
		_, err := parseNotice(body)
		assert.Error(t, err, body)
	}
}

// A spot interruption's grace period is what is left of the two-minute notice; other kinds
// take the claim's terminationGracePeriod.
func TestInterruptionIntent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	grace := 10 * time.Minute
	c := claimRef{Name: "default-abc", UID: "uid-1", NodeName: "ip-10-0-0-1.ec2.internal", InstanceID: "i-1", Pool: "default", Grace: &grace}
	spot := &interruptionv1.InterruptionEvent{Kind: commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION, EventId: "e1",
		DetailType: "EC2 Spot Instance Interruption Warning", EventTime: timestamppb.New(t0), State: "terminate", InstanceId: "i-1"}
	in := interruptionIntent(spot, c, t0.Add(30*time.Second))
	assert.Equal(t, "uid-1/interrupted", in.GetIntentId())
	assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED, in.GetReason())
	assert.False(t, in.GetVoluntary())
	assert.Equal(t, 90*time.Second, in.GetGracePeriod().AsDuration())
	assert.Equal(t, "e1", in.GetInterruptionEventId())
	assert.Contains(t, in.GetWhy(), "EC2 Spot Instance Interruption Warning e1 for i-1 (terminate)")

	late := interruptionIntent(spot, c, t0.Add(3*time.Minute))
	assert.Equal(t, time.Duration(0), late.GetGracePeriod().AsDuration(), "past the notice: no grace left")

	health := &interruptionv1.InterruptionEvent{Kind: commonv1.InterruptionKind_INTERRUPTION_KIND_SCHEDULED_CHANGE, EventId: "e2",
		DetailType: "AWS Health Event", EventTime: timestamppb.New(t0)}
	assert.Equal(t, grace, interruptionIntent(health, c, t0).GetGracePeriod().AsDuration())
}

func TestKindNames(t *testing.T) {
	assert.Equal(t, "spot_interruption", kindName(commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION))
	assert.Equal(t, "unknown", kindName(commonv1.InterruptionKind_INTERRUPTION_KIND_UNSPECIFIED))
	assert.Equal(t, "spot", kindSubject(commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION))
	assert.Equal(t, "statechange", kindSubject(commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE))
}

// A spot interruption's grace period counts from the warning, not from when the intent is made:
// an event 90 s old leaves 30 s, whether it has an event_time or only its receive_time; a
// shorter terminationGracePeriod on the claim wins, and a warning stamped ahead of our clock
// gives no more than the two minutes.
func TestSpotGraceCountsFromTheWarning(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	warned := now.Add(-90 * time.Second)
	long, short := 10*time.Minute, 20*time.Second
	c := claimRef{Name: "default-abc", UID: "uid-1", InstanceID: "i-1", Grace: &long}
	spot := func(eventTime, receiveTime time.Time) *interruptionv1.InterruptionEvent {
		ev := &interruptionv1.InterruptionEvent{Kind: commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION, EventId: "e1", InstanceId: "i-1"}
		if !eventTime.IsZero() {
			ev.EventTime = timestamppb.New(eventTime)
		}
		if !receiveTime.IsZero() {
			ev.ReceiveTime = timestamppb.New(receiveTime)
		}
		return ev
	}

	in := interruptionIntent(spot(warned, now), c, now)
	assert.LessOrEqual(t, in.GetGracePeriod().AsDuration(), 30*time.Second, "90 s of the notice are gone")
	at, ok := intentDeadline(in, now.Add(time.Hour))
	require.True(t, ok)
	assert.Equal(t, warned.Add(2*time.Minute), at, "the deadline is the warning plus two minutes, whenever a worker gets to it")

	assert.Equal(t, 30*time.Second, interruptionIntent(spot(time.Time{}, warned), c, now).GetGracePeriod().AsDuration(),
		"without an event_time the receive_time anchors it, not the claim's terminationGracePeriod")
	assert.Equal(t, 2*time.Minute, interruptionIntent(spot(time.Time{}, time.Time{}), c, now).GetGracePeriod().AsDuration(),
		"an event with no time at all was warned at the latest now")
	assert.Equal(t, 2*time.Minute, interruptionIntent(spot(now.Add(30*time.Second), now), c, now).GetGracePeriod().AsDuration(),
		"a warning stamped ahead of our clock gives no more than the notice")
	c.Grace = &short
	assert.Equal(t, short, interruptionIntent(spot(warned, now), c, now).GetGracePeriod().AsDuration(),
		"the claim's shorter terminationGracePeriod wins")
}
