package v1

import "github.com/fleetwright/fleetwright/pkg/apis/internal/hashing"

// NodePoolHashVersion is the version of NodePool.Hash, written beside the hash as
// NodePoolHashVersionAnnotationKey. It changes when what is hashed, or how, changes (a field
// added to or removed from the hash, a default changed); a NodeClaim whose hash has another
// version is annotated anew, not called drifted. Fleetwright's hash is not Karpenter's, so its
// versions are its own: a NodeClaim Karpenter annotated ("v3") is re-annotated, not drifted.
const NodePoolHashVersion = "fw1"

// Hash is the hash of what the pool's NodeClaims are made from, which a NodeClaim records in
// NodePoolHashAnnotationKey when it is created: the template's labels and annotations, taints,
// startup taints, node class reference, expireAfter and terminationGracePeriod — as Karpenter,
// everything of spec.template but its requirements, which drift compares against the NodeClaim's
// labels instead (RequirementsDrifted). Disruption settings, limits and weight are not hashed:
// changing them changes no node. Map order and list order do not matter; an unset field hashes
// as its zero value.
func (in *NodePool) Hash() string {
	t := in.Spec.Template.DeepCopy()
	t.Spec.Requirements = nil
	h, err := hashing.Of(t)
	if err != nil {
		return "" // cannot happen: the template's types always encode as JSON
	}
	return h
}
