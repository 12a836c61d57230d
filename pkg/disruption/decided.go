package disruption

import (
	"encoding/json"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// DisruptionReasonExpired is the reason DecisionAnnotation records for a claim deleted because
// it outlived expireAfter. Karpenter v1 budgets do not name it (expiry is forceful), so the API
// does not declare it.
const DisruptionReasonExpired karpv1.DisruptionReason = "Expired"

// DecidedReason is the reason of the disruption decision recorded on a NodeClaim
// (DecisionAnnotation's "reason": Empty, Underutilized, Drifted, Expired); "" when no decision
// is recorded or it cannot be read. A claim being deleted without one was deleted by hand (or
// by another controller).
func DecidedReason(nc *karpv1.NodeClaim) karpv1.DisruptionReason {
	v := nc.Annotations[DecisionAnnotation]
	if v == "" {
		return ""
	}
	var d struct {
		Reason karpv1.DisruptionReason `json:"reason"`
	}
	if json.Unmarshal([]byte(v), &d) != nil {
		return ""
	}
	return d.Reason
}
