package disruption

import (
	"fmt"
	"slices"
	"strings"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// DriftReason is why a NodeClaim is drifted: the Reason of its Drifted condition, in Karpenter's
// words (sigs.k8s.io/karpenter's nodeclaim disruption controller and the AWS provider's
// cloudprovider/drift.go).
type DriftReason string

// Drift reasons, in the order they are checked: the first that holds is the claim's.
const (
	// NodePoolDrifted: the pool's template (all but its requirements) changed since the claim was
	// made — its karpenter.sh/nodepool-hash is not the pool's hash now.
	NodePoolDrifted DriftReason = "NodePoolDrifted"
	// RequirementsDrifted: the claim's labels no longer meet the pool's requirements.
	RequirementsDrifted DriftReason = "RequirementsDrifted"
	// NodeClassDrift: the node class (all but its selector terms) changed since the instance was
	// launched — its karpenter.k8s.aws/ec2nodeclass-hash is not the class's hash now.
	NodeClassDrift DriftReason = "NodeClassDrift"
	// AMIDrift: the instance's AMI is not among those the class resolves to now.
	AMIDrift DriftReason = "AMIDrift"
	// SecurityGroupDrift: the instance's security groups are not those the class resolves to now.
	SecurityGroupDrift DriftReason = "SecurityGroupDrift"
	// SubnetDrift: the instance's subnet is not among those the class resolves to now.
	SubnetDrift DriftReason = "SubnetDrift"
)

// Annotations the launcher records on a NodeClaim when it launches its instance: what the
// instance was launched into, for SubnetDrift and SecurityGroupDrift.
const (
	// SubnetAnnotation is the instance's subnet id.
	SubnetAnnotation = "fleetwright.io/subnet-id"
	// SecurityGroupsAnnotation is the instance's security group ids, sorted, comma-separated.
	SecurityGroupsAnnotation = "fleetwright.io/security-group-ids"
)

// Drift is a drifted claim's reason and what it means in words.
type Drift struct {
	Reason  DriftReason
	Message string
}

// Drifted reports whether a launched NodeClaim no longer matches its NodePool (pool: a NodePool,
// or a Provisioner's translation) and node class (class: an EC2NodeClass with its status, or an
// AWSNodeTemplate's translation with the status the launcher resolved for it), and why; the
// first reason that holds, in the order of the DriftReason constants. A claim not launched
// (Launched not True) is never drifted. A nil pool or class skips the checks against it. A fact
// that is unknown is no drift: a hash missing on either side or of another version (the claim is
// re-annotated instead, see Rehash), a class status with no AMIs, subnets or security groups yet,
// a claim that recorded no image, subnet or security groups.
func Drifted(claim *karpv1.NodeClaim, pool *karpv1.NodePool, class *ec2v1.EC2NodeClass) (Drift, bool) {
	if claim == nil || !claim.IsTrue(karpv1.ConditionTypeLaunched) {
		return Drift{}, false
	}
	if d, ok := firstDrift(claim, pool, poolHashDrift, requirementsDrift); ok {
		return d, true
	}
	return firstDrift(claim, class, classHashDrift, amiDrift, securityGroupDrift, subnetDrift)
}

// firstDrift is the first drift checks find against of, in order; none when of is nil.
func firstDrift[T any](claim *karpv1.NodeClaim, of *T, checks ...func(*karpv1.NodeClaim, *T) (Drift, bool)) (Drift, bool) {
	if of == nil {
		return Drift{}, false
	}
	for _, check := range checks {
		if d, ok := check(claim, of); ok {
			return d, true
		}
	}
	return Drift{}, false
}

// hashDrift is reason, in the words of format (given name, the hash now and the claim's), when
// the claim recorded a hash (under hashKey) of the current version that is not now; a hash
// missing on either side or of another version is no drift.
func hashDrift(claim *karpv1.NodeClaim, hashKey, versionKey, version, now string, reason DriftReason, format, name string) (Drift, bool) {
	was, ok := claim.Annotations[hashKey]
	if !ok || now == "" || claim.Annotations[versionKey] != version || was == now {
		return Drift{}, false
	}
	return Drift{reason, fmt.Sprintf(format, name, now, was)}, true
}

func poolHashDrift(claim *karpv1.NodeClaim, pool *karpv1.NodePool) (Drift, bool) {
	return hashDrift(claim, karpv1.NodePoolHashAnnotationKey, karpv1.NodePoolHashVersionAnnotationKey, karpv1.NodePoolHashVersion, pool.Hash(),
		NodePoolDrifted, "NodePool %s changed since the NodeClaim was made from it: its template (labels, annotations, taints, "+
			"startup taints, node class, expireAfter or terminationGracePeriod) hashes to %s, the NodeClaim's to %s", pool.Name)
}

// requirementsDrift is Karpenter's RequirementsDrifted: every requirement of the pool must hold
// for the claim's labels; a key the claim has no label for holds for NotIn and DoesNotExist, and
// — since a claim is labelled only with the values it was narrowed to one of, where Karpenter
// labels every requirement's key — for a requirement the claim's own spec.requirements on that
// key still meet in part (the pool's requirement as it was when the claim was made, or
// narrowed since but not away from it). A requirement on a key the claim neither has a label
// nor a requirement for is one the pool added since: drifted.
func requirementsDrift(claim *karpv1.NodeClaim, pool *karpv1.NodePool) (Drift, bool) {
	for _, r := range pool.Spec.Template.Spec.Requirements {
		want, err := scheduling.NewRequirements(coreRequirement(r))
		if err != nil {
			continue // refused at admission (the CRD's validation): nothing to compare with
		}
		v, labelled := claim.Labels[r.Key]
		if labelled && want.Matches(claim.Labels) || !labelled && specMeets(claim, r.Key, want) {
			continue
		}
		need := fmt.Sprintf("%s %s", r.Key, r.Operator)
		if len(r.Values) > 0 {
			need += " " + strings.Join(r.Values, ",")
		}
		have := "has no label " + r.Key
		if labelled {
			have = fmt.Sprintf("has %s=%s", r.Key, v)
		}
		return Drift{RequirementsDrifted, fmt.Sprintf("NodePool %s requires %s; the NodeClaim %s", pool.Name, need, have)}, true
	}
	return Drift{}, false
}

// specMeets reports whether a claim without a label for key still meets want on it: want
// allows the label to be absent (NotIn, DoesNotExist), or the claim's spec.requirements on key
// leave some value want allows.
func specMeets(claim *karpv1.NodeClaim, key string, want scheduling.Requirements) bool {
	if want.Matches(map[string]string{}) {
		return true
	}
	var own []scheduling.Requirement
	for _, r := range claim.Spec.Requirements {
		if r.Key == key {
			own = append(own, coreRequirement(r))
		}
	}
	if len(own) == 0 {
		return false
	}
	have, err := scheduling.NewRequirements(own...)
	return err == nil && have.Compatible(want) == nil
}

func coreRequirement(r karpv1.NodeSelectorRequirementWithMinValues) scheduling.Requirement {
	return scheduling.Requirement{Key: r.Key, Operator: scheduling.Operator(r.Operator), Values: r.Values}
}

func classHashDrift(claim *karpv1.NodeClaim, class *ec2v1.EC2NodeClass) (Drift, bool) {
	return hashDrift(claim, ec2v1.AnnotationEC2NodeClassHash, ec2v1.AnnotationEC2NodeClassHashVersion, ec2v1.EC2NodeClassHashVersion, class.Hash(),
		NodeClassDrift, "EC2NodeClass %s changed since the instance was launched with it: its spec (all but its selector terms) "+
			"hashes to %s, the NodeClaim's to %s", class.Name)
}

func amiDrift(claim *karpv1.NodeClaim, class *ec2v1.EC2NodeClass) (Drift, bool) {
	if len(class.Status.AMIs) == 0 || claim.Status.ImageID == "" {
		return Drift{}, false
	}
	var ids []string
	for _, a := range class.Status.AMIs {
		if a.ID == claim.Status.ImageID {
			return Drift{}, false
		}
		ids = append(ids, a.ID)
	}
	return Drift{AMIDrift, fmt.Sprintf("the instance's AMI %s is not among those EC2NodeClass %s resolves to now (%s)",
		claim.Status.ImageID, class.Name, strings.Join(ids, ", "))}, true
}

// securityGroupDrift is Karpenter's: the instance's groups must be exactly the class's.
func securityGroupDrift(claim *karpv1.NodeClaim, class *ec2v1.EC2NodeClass) (Drift, bool) {
	recorded := claim.Annotations[SecurityGroupsAnnotation]
	if len(class.Status.SecurityGroups) == 0 || recorded == "" {
		return Drift{}, false
	}
	have := sortedSet(strings.Split(recorded, ","))
	var want []string
	for _, g := range class.Status.SecurityGroups {
		want = append(want, g.ID)
	}
	want = sortedSet(want)
	if slices.Equal(have, want) {
		return Drift{}, false
	}
	return Drift{SecurityGroupDrift, fmt.Sprintf("the instance's security groups (%s) are not those EC2NodeClass %s resolves to now (%s)",
		strings.Join(have, ", "), class.Name, strings.Join(want, ", "))}, true
}

func subnetDrift(claim *karpv1.NodeClaim, class *ec2v1.EC2NodeClass) (Drift, bool) {
	recorded := claim.Annotations[SubnetAnnotation]
	if len(class.Status.Subnets) == 0 || recorded == "" {
		return Drift{}, false
	}
	var ids []string
	for _, s := range class.Status.Subnets {
		if s.ID == recorded {
			return Drift{}, false
		}
		ids = append(ids, s.ID)
	}
	return Drift{SubnetDrift, fmt.Sprintf("the instance's subnet %s is not among those EC2NodeClass %s resolves to now (%s)",
		recorded, class.Name, strings.Join(ids, ", "))}, true
}

func sortedSet(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Rehash returns the hash annotations to write on a claim whose recorded hash versions are not
// the current ones (or are missing: a claim made before hashes were recorded), as Karpenter's
// hash controllers do: the version is brought up to date and, unless the claim is already
// Drifted (whose drift a hash of another scheme cannot confirm or clear), the hash too — the
// claim is taken to match its pool and class as they are now. Nil when nothing is to change; a
// nil pool or class leaves its annotations alone.
func Rehash(claim *karpv1.NodeClaim, pool *karpv1.NodePool, class *ec2v1.EC2NodeClass) map[string]string {
	out := map[string]string{}
	drifted := claim.Condition(karpv1.ConditionTypeDrifted) != nil
	if pool != nil && claim.Annotations[karpv1.NodePoolHashVersionAnnotationKey] != karpv1.NodePoolHashVersion {
		out[karpv1.NodePoolHashVersionAnnotationKey] = karpv1.NodePoolHashVersion
		if h := pool.Hash(); !drifted && h != "" {
			out[karpv1.NodePoolHashAnnotationKey] = h
		}
	}
	if class != nil && claim.Annotations[ec2v1.AnnotationEC2NodeClassHashVersion] != ec2v1.EC2NodeClassHashVersion {
		out[ec2v1.AnnotationEC2NodeClassHashVersion] = ec2v1.EC2NodeClassHashVersion
		if h := class.Hash(); !drifted && h != "" {
			out[ec2v1.AnnotationEC2NodeClassHash] = h
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
