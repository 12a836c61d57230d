package awsemu

import (
	"fmt"
	"slices"
	"time"
)

// Throttle describes which calls the emulator rejects as throttled (EC2 RequestLimitExceeded,
// HTTP 503; SQS RequestThrottled; SSM, EKS and Pricing ThrottlingException). The zero value
// throttles nothing.
type Throttle struct {
	// Service is "ec2", "sqs", "iam", "ssm", "eks", "pricing" or "" for all.
	Service string `json:"service,omitempty"`
	// Actions limits throttling to these actions; empty means every action of the service.
	Actions []string `json:"actions,omitempty"`
	// Share of matching calls rejected, 0..1. Deterministic: with 0.5 every second call is
	// rejected, with 1 every call.
	Share float64 `json:"share,omitempty"`
	// RatePerSecond, if positive, admits at most this many matching calls per second of the
	// emulator's clock (a token bucket holding one second's worth) and rejects the rest.
	RatePerSecond float64 `json:"ratePerSecond,omitempty"`
}

func (t Throttle) validate() error {
	if t.Service != "" && !slices.Contains([]string{"ec2", "sqs", "iam", "ssm", "eks", "pricing"}, t.Service) {
		return fmt.Errorf("service %q is not ec2, sqs, iam, ssm, eks, pricing or empty", t.Service)
	}
	if t.Share < 0 || t.Share > 1 {
		return fmt.Errorf("share %g is not within 0..1", t.Share)
	}
	if t.RatePerSecond < 0 {
		return fmt.Errorf("rate %g is negative", t.RatePerSecond)
	}
	return nil
}

type throttleState struct {
	rule   Throttle
	acc    float64
	tokens float64
	last   time.Time
}

// SetThrottle replaces the throttling rule.
func (e *Emulator) SetThrottle(t Throttle) error {
	if err := t.validate(); err != nil {
		return fmt.Errorf("setting throttle: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.throttle = throttleState{rule: t, tokens: t.RatePerSecond, last: e.cfg.Clock.Now()}
	return nil
}

// throttled decides whether this call is rejected.
func (e *Emulator) throttled(service, action string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.throttle
	r := s.rule
	if r.Share == 0 && r.RatePerSecond == 0 {
		return false
	}
	if r.Service != "" && r.Service != service || len(r.Actions) > 0 && !slices.Contains(r.Actions, action) {
		return false
	}
	if r.Share > 0 {
		s.acc += r.Share
		if s.acc >= 1-1e-9 {
			s.acc--
			return true
		}
	}
	if r.RatePerSecond > 0 {
		now := e.cfg.Clock.Now()
		s.tokens = min(r.RatePerSecond, s.tokens+now.Sub(s.last).Seconds()*r.RatePerSecond)
		s.last = now
		if s.tokens < 1 {
			return true
		}
		s.tokens--
	}
	return false
}
