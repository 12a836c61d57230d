package v1

import "github.com/fleetwright/fleetwright/pkg/apis/internal/hashing"

// EC2NodeClassHashVersion is the version of EC2NodeClass.Hash, written beside the hash as
// AnnotationEC2NodeClassHashVersion. It changes when what is hashed, or how, changes; a NodeClaim
// whose hash has another version is annotated anew, not called drifted. Fleetwright's hash is
// not Karpenter's, so its versions are its own.
const EC2NodeClassHashVersion = "fw1"

// Hash is the hash of how the class launches instances, which a NodeClaim records in
// AnnotationEC2NodeClassHash: as Karpenter, the whole spec but its selector terms (subnets,
// security groups, AMIs: drift compares what they resolve to — SubnetDrift, SecurityGroupDrift,
// AMIDrift — not the terms) and with the AMI family as resolved (ResolvedAMIFamily), so that
// writing out the family an alias implied is no change. User data, role, instance profile, tags,
// kubelet, block devices, instance-store policy, metadata options, public IP, monitoring and
// context are hashed. Map and list order do not matter; an unset field hashes as its zero value.
func (in *EC2NodeClass) Hash() string {
	s := in.Spec.DeepCopy()
	s.SubnetSelectorTerms, s.SecurityGroupSelectorTerms, s.AMISelectorTerms, s.AMIFamily = nil, nil, nil, nil
	h, err := hashing.Of(struct {
		Spec      *EC2NodeClassSpec `json:"spec"`
		AMIFamily string            `json:"amiFamily"`
	}{s, in.ResolvedAMIFamily()})
	if err != nil {
		return "" // cannot happen: the spec's types always encode as JSON
	}
	return h
}
