package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// This file puts every disruption decision and every block on the bus as a DisruptionDecision
// on <prefix>.terminations.decisions, next to the log line, the trace and the events: the audit
// stream keeps it, and answers "why was this node removed?" and "why not?".

// announce publishes one disruption decision (Nats-Msg-Id = decision_id, so a step repeated by
// a retried pass or a new leader is dropped). A failure is logged: the decision stands without
// its audit record.
func (s *scheduler) announce(ctx context.Context, m *terminationv1.DisruptionDecision) {
	wctx, done, err := s.fence(ctx, "disruption_decision")
	if err != nil {
		return
	}
	defer done()
	if err := s.rt.Bus.Publish(wctx, s.rt.Bus.Prefix().Of(subject.TerminationsDecisions), m, m.DecisionId); err != nil {
		s.rt.Log.Warn().Err(err).Str("decision", m.DecisionId).Str("kind", m.Kind.String()).Strs("nodeclaims", m.NodeClaimNames).
			Msg("publishing the disruption decision")
	}
}

// decidedMessage is a decision just made over its old claims.
func decidedMessage(old []*karpv1.NodeClaim, rec disruption.Decision) *terminationv1.DisruptionDecision {
	return decisionMessage(terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_DECIDED, old, rec, rec.Why, rec.Savings)
}

// terminatingMessage is one old claim of a decision handed to the terminator.
func terminatingMessage(nc *karpv1.NodeClaim, rec disruption.Decision) *terminationv1.DisruptionDecision {
	return decisionMessage(terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_TERMINATING, []*karpv1.NodeClaim{nc}, rec,
		rec.Why, share(rec))
}

// abandonedMessage is one old claim of a decision given up, and why.
func abandonedMessage(nc *karpv1.NodeClaim, rec disruption.Decision, why string) *terminationv1.DisruptionDecision {
	return decisionMessage(terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_ABANDONED, []*karpv1.NodeClaim{nc}, rec,
		why, share(rec))
}

// blockedMessage is a claim that would be disrupted for reason but is held back, and by what.
// Its id depends on the claim, the reason and why only, as the once that tells it.
func blockedMessage(nc *karpv1.NodeClaim, reason karpv1.DisruptionReason, why string, now time.Time) *terminationv1.DisruptionDecision {
	m := decisionMessage(terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_BLOCKED, []*karpv1.NodeClaim{nc},
		disruption.Decision{Reason: reason, DecidedAt: now}, why, 0)
	sum := sha256.Sum256([]byte(why))
	m.DecisionId = string(nc.UID) + "/" + strings.ToLower(string(reason)) + "/blocked/" + hex.EncodeToString(sum[:])[:12]
	return m
}

// share is one old claim's part of a decision's savings.
func share(rec disruption.Decision) float64 {
	if len(rec.Claims) <= 0 {
		return rec.Savings
	}
	return rec.Savings / float64(len(rec.Claims))
}

func decisionMessage(kind terminationv1.DisruptionDecisionKind, claims []*karpv1.NodeClaim, rec disruption.Decision, why string,
	savings float64,
) *terminationv1.DisruptionDecision {
	m := &terminationv1.DisruptionDecision{Kind: kind, Reason: terminationReasons[rec.Reason], Why: why, SavingsUsdPerHour: savings,
		DecidedAt: timestamppb.New(rec.DecidedAt), ReplacementNodeClaimNames: rec.Replacements}
	switch rec.Action {
	case disruption.ActionDelete:
		m.Action = terminationv1.DisruptionAction_DISRUPTION_ACTION_DELETE
	case disruption.ActionReplace:
		m.Action = terminationv1.DisruptionAction_DISRUPTION_ACTION_REPLACE
	}
	pools := map[string]bool{}
	uids := make([]string, 0, len(claims))
	for _, nc := range claims {
		m.NodeClaimNames = append(m.NodeClaimNames, nc.Name)
		m.NodeNames = append(m.NodeNames, nc.Status.NodeName)
		if p := claimPool(nc); p != "" && !pools[p] {
			pools[p] = true
			m.NodePoolNames = append(m.NodePoolNames, p)
		}
		uids = append(uids, string(nc.UID))
	}
	sort.Strings(m.NodePoolNames)
	key := strings.Join(uids, "")
	if len(uids) > 1 {
		sort.Strings(uids)
		sum := sha256.Sum256([]byte(strings.Join(uids, ",")))
		key = hex.EncodeToString(sum[:])[:16]
	}
	kindName := strings.ToLower(strings.TrimPrefix(kind.String(), "DISRUPTION_DECISION_KIND_"))
	m.DecisionId = key + "/" + strings.ToLower(string(rec.Reason)) + "/" + strconv.FormatInt(rec.DecidedAt.Unix(), 10) + "/" + kindName
	return m
}

// terminationReasons are the wire forms of the disruption reasons; any other is UNSPECIFIED.
var terminationReasons = map[karpv1.DisruptionReason]commonv1.TerminationReason{
	karpv1.DisruptionReasonUnderutilized: commonv1.TerminationReason_TERMINATION_REASON_UNDERUTILIZED,
	karpv1.DisruptionReasonDrifted:       commonv1.TerminationReason_TERMINATION_REASON_DRIFTED,
	karpv1.DisruptionReasonEmpty:         commonv1.TerminationReason_TERMINATION_REASON_EMPTY,
	disruption.ReasonExpired:             commonv1.TerminationReason_TERMINATION_REASON_EXPIRED,
}
