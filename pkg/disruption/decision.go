package disruption

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// DecisionAnnotation records a disruption decision on each NodeClaim it removes (Decision, as
// JSON). It is written before anything else is done, so the claim counts as disrupting at once
// and a new leader carries the decision on where the last one stopped.
const DecisionAnnotation = "fleetwright.io/disruption"

// ReasonExpired is the reason of a claim removed for its expireAfter: forceful, so no budget
// holds it (Karpenter's expiration), but recorded like the voluntary reasons.
const ReasonExpired karpv1.DisruptionReason = "Expired"

// Action is what a decision does with its claims.
type Action string

const (
	ActionDelete  Action = "Delete"  // the pods move to the nodes there are
	ActionReplace Action = "Replace" // replacements are launched and initialized first
)

// StepName names a step of a decision, in Karpenter v1's order.
type StepName string

const (
	StepDecided     StepName = "Decided"     // recorded on the claims (and validated, for consolidation)
	StepTainted     StepName = "Tainted"     // karpenter.sh/disrupted:NoSchedule on every node: nothing new lands
	StepLaunched    StepName = "Launched"    // replacements created and their launches asked for
	StepInitialized StepName = "Initialized" // every replacement initialized
	StepDeleted     StepName = "Deleted"     // the claims deleted: the terminator drains and terminates
	StepAbandoned   StepName = "Abandoned"   // given up: untainted, unregistered replacements deleted, record removed
)

// Step is one step of a decision, when it happened and, for some, what it found.
type Step struct {
	Name   StepName  `json:"name"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail,omitempty"`
}

// Decision is the record of one disruption decision, on each claim it removes.
type Decision struct {
	ID           string                  `json:"id"`
	Reason       karpv1.DisruptionReason `json:"reason"`
	Action       Action                  `json:"action"`
	Claims       []string                `json:"claims"`
	Replacements []string                `json:"replacements,omitempty"`
	Why          string                  `json:"why"`
	Savings      float64                 `json:"savingsUSDPerHour,omitempty"`
	DecidedAt    time.Time               `json:"decidedAt"`
	Steps        []Step                  `json:"steps,omitempty"`
}

// DecisionID is a decision's deterministic id: its reason, its first claim and when it was made.
func DecisionID(reason karpv1.DisruptionReason, firstClaimUID string, at time.Time) string {
	return fmt.Sprintf("%s/%s/%d", strings.ToLower(string(reason)), firstClaimUID, at.Unix())
}

// Value encodes the decision for DecisionAnnotation.
func (d Decision) Value() string {
	b, _ := json.Marshal(d) // plain fields: cannot fail
	return string(b)
}

// DecisionOf reads the decision recorded on a claim; ok is false when there is none, err when
// what is there does not parse.
func DecisionOf(nc *karpv1.NodeClaim) (d Decision, ok bool, err error) {
	v := nc.Annotations[DecisionAnnotation]
	if v == "" {
		return Decision{}, false, nil
	}
	if err := json.Unmarshal([]byte(v), &d); err != nil {
		return Decision{}, false, fmt.Errorf("nodeclaim %s: %s does not parse: %w", nc.Name, DecisionAnnotation, err)
	}
	if len(d.Claims) == 0 {
		d.Claims = []string{nc.Name} // a record of an older release names none
	}
	return d, true, nil
}

// Did reports whether the step is recorded, and when.
func (d Decision) Did(name StepName) (time.Time, bool) {
	for _, s := range d.Steps {
		if s.Name == name {
			return s.At, true
		}
	}
	return time.Time{}, false
}

// With returns the decision with the step recorded (once: a step already recorded keeps its
// first time).
func (d Decision) With(name StepName, at time.Time, detail string) Decision {
	if _, ok := d.Did(name); ok {
		return d
	}
	d.Steps = append(append([]Step(nil), d.Steps...), Step{Name: name, At: at.UTC().Truncate(time.Second), Detail: detail})
	return d
}

// Replacement is what the decider sees of one of a decision's replacements.
type Replacement struct {
	Exists, Deleting, Initialized bool
	// LaunchFailed says why its launch failed for good ("" if it has not).
	LaunchFailed string
}

// Observed is what the decider sees of a decision's claims and replacements now.
type Observed struct {
	Now time.Time
	// Untainted are the decision's claims whose node does not carry the disrupted taint yet
	// (a claim without a node, or being deleted, is not among them).
	Untainted []string
	// Deleting are the decision's claims being deleted or gone.
	Deleting []string
	// Replacements by name; one missing has not been seen.
	Replacements map[string]Replacement
}

// Move is what to do next with a decision.
type Move int

const (
	MoveTaint   Move = iota + 1 // taint the claims' nodes (Untainted)
	MoveLaunch                  // create the missing replacements and ask for their launch
	MoveWait                    // replacements not initialized yet
	MoveDelete                  // delete the claims not deleting yet
	MoveAbandon                 // give up (why): untaint, delete unregistered replacements, remove the record
	MoveDone                    // every claim is being deleted: the terminator has them
)

// Next is the decision's next move, Karpenter v1's order made one function so every path obeys
// it: taint before any replacement exists, replacements initialized before any claim is
// deleted, a failed or slow replacement abandons the decision before anything is deleted, and
// once a claim is deleted there is no way back. timeout bounds the wait for replacements.
func (d Decision) Next(o Observed, timeout time.Duration) (Move, string) {
	if len(o.Deleting) > 0 && len(o.Deleting) >= len(d.Claims) {
		return MoveDone, ""
	}
	if len(o.Deleting) > 0 {
		return MoveDelete, "" // past the point of no return: finish
	}
	if len(o.Untainted) > 0 {
		return MoveTaint, ""
	}
	launched, didLaunch := d.Did(StepLaunched)
	missing, waiting := 0, 0
	for _, name := range d.Replacements {
		r, seen := o.Replacements[name]
		switch {
		case !seen || !r.Exists:
			if didLaunch && o.Now.Sub(launched) > replacementVisible {
				return MoveAbandon, "replacement " + name + " is gone"
			}
			missing++
		case r.Deleting:
			return MoveAbandon, "replacement " + name + " is being deleted"
		case r.LaunchFailed != "":
			return MoveAbandon, "replacement " + name + " failed to launch: " + r.LaunchFailed
		case !r.Initialized:
			waiting++
		}
	}
	if missing > 0 && !didLaunch {
		return MoveLaunch, ""
	}
	if missing+waiting > 0 {
		if o.Now.Sub(d.DecidedAt) > timeout {
			return MoveAbandon, fmt.Sprintf("replacements not initialized within %s", timeout)
		}
		return MoveWait, ""
	}
	return MoveDelete, ""
}

// replacementVisible is how long after its creation a replacement may still be missing from a
// cache before the decision takes it for gone.
const replacementVisible = 30 * time.Second
