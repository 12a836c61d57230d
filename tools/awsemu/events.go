package awsemu

import (
	"encoding/json"
	"fmt"
	"time"
)

// Interruption kinds, as the admin API names them.
const (
	KindSpotInterruption = "spot-interruption"
	KindRebalance        = "rebalance-recommendation"
	KindScheduledChange  = "scheduled-change"
	KindStateChange      = "state-change"
)

// Interruption asks the emulator to send an EventBridge event about an instance to the
// interruption queue.
type Interruption struct {
	Kind       string `json:"kind"`
	InstanceID string `json:"instanceId"`
	// State is the new state of a state-change event (default "stopping"). The instance itself
	// does not change state: the event is what is being tested.
	State string `json:"state,omitempty"`
	// Notice overrides Config.SpotNotice for a spot interruption: the instance is terminated
	// this long after the warning. Negative means never.
	Notice time.Duration `json:"notice,omitempty"`
}

// event is the EventBridge envelope.
type event struct {
	Version    string   `json:"version"`
	ID         string   `json:"id"`
	DetailType string   `json:"detail-type"`
	Source     string   `json:"source"`
	Account    string   `json:"account"`
	Time       string   `json:"time"`
	Region     string   `json:"region"`
	Resources  []string `json:"resources"`
	Detail     any      `json:"detail"`
}

type healthDetail struct {
	EventArn          string         `json:"eventArn"`
	Service           string         `json:"service"`
	EventTypeCode     string         `json:"eventTypeCode"`
	EventTypeCategory string         `json:"eventTypeCategory"`
	StartTime         string         `json:"startTime"`
	EndTime           string         `json:"endTime"`
	EventDescription  []healthDesc   `json:"eventDescription"`
	AffectedEntities  []healthEntity `json:"affectedEntities"`
}

type healthDesc struct {
	Language          string `json:"language"`
	LatestDescription string `json:"latestDescription"`
}

type healthEntity struct {
	EntityValue string `json:"entityValue"`
}

// Interrupt sends the event for an instance to the interruption queue; a spot interruption
// warning also schedules the instance's termination after the notice.
func (e *Emulator) Interrupt(in Interruption) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked()
	inst, ok := e.instances[in.InstanceID]
	if !ok {
		return fmt.Errorf("interrupting %s: no such instance", in.InstanceID)
	}
	q, ok := e.queues[e.cfg.InterruptionQueue]
	if !ok {
		return fmt.Errorf("interrupting %s: interruption queue %q was deleted", in.InstanceID, e.cfg.InterruptionQueue)
	}
	now := e.cfg.Clock.Now().UTC()
	ev := event{Version: "0", ID: e.uuidLocked(), Source: "aws.ec2", Account: e.cfg.AccountID,
		Time: now.Format(time.RFC3339), Region: e.cfg.Region}
	switch in.Kind {
	case KindSpotInterruption:
		if inst.CapacityType != CapacitySpot {
			return fmt.Errorf("interrupting %s: not a spot instance", inst.ID)
		}
		ev.DetailType = "EC2 Spot Instance Interruption Warning"
		ev.Resources = []string{"arn:aws:ec2:" + inst.Zone + ":instance/" + inst.ID}
		ev.Detail = map[string]string{"instance-id": inst.ID, "instance-action": "terminate"}
		notice := e.cfg.SpotNotice
		if in.Notice != 0 {
			notice = in.Notice
		}
		if notice >= 0 {
			e.afterLocked(notice, func() { e.terminateLocked(inst) })
		}
	case KindRebalance:
		ev.DetailType = "EC2 Instance Rebalance Recommendation"
		ev.Resources = []string{"arn:aws:ec2:" + inst.Zone + ":instance/" + inst.ID}
		ev.Detail = map[string]string{"instance-id": inst.ID}
	case KindStateChange:
		state := in.State
		if state == "" {
			state = "stopping"
		}
		if _, ok := stateCodes[state]; !ok {
			return fmt.Errorf("interrupting %s: unknown state %q", inst.ID, state)
		}
		ev.DetailType = "EC2 Instance State-change Notification"
		ev.Resources = []string{"arn:aws:ec2:" + e.cfg.Region + ":" + e.cfg.AccountID + ":instance/" + inst.ID}
		ev.Detail = map[string]string{"instance-id": inst.ID, "state": state}
	case KindScheduledChange:
		ev.DetailType = "AWS Health Event"
		ev.Source = "aws.health"
		ev.Resources = []string{inst.ID}
		start := now.Add(14 * 24 * time.Hour)
		ev.Detail = healthDetail{
			EventArn:          "arn:aws:health:" + e.cfg.Region + "::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_" + ev.ID,
			Service:           "EC2",
			EventTypeCode:     "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
			EventTypeCategory: "scheduledChange",
			StartTime:         start.Format(time.RFC1123),
			EndTime:           start.Add(24 * time.Hour).Format(time.RFC1123),
			EventDescription: []healthDesc{{Language: "en_US",
				LatestDescription: "EC2 has detected degradation of the underlying hardware hosting your instance and will retire it."}},
			AffectedEntities: []healthEntity{{EntityValue: inst.ID}},
		}
	default:
		return fmt.Errorf("interrupting %s: unknown kind %q (want %s, %s, %s or %s)", inst.ID, in.Kind,
			KindSpotInterruption, KindRebalance, KindScheduledChange, KindStateChange)
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encoding %s event: %w", in.Kind, err)
	}
	e.enqueueLocked(q, string(body), 0)
	return nil
}
