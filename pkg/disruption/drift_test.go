package disruption

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

func driftPool() *karpv1.NodePool {
	return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{
		ObjectMeta: karpv1.TemplateMeta{Labels: map[string]string{"team": "a"}},
		Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}},
				{Key: "karpenter.k8s.aws/instance-generation", Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}},
				{Key: "example.com/gpu", Operator: corev1.NodeSelectorOpDoesNotExist},
			},
		},
	}}}
}

func driftClass() *ec2v1.EC2NodeClass {
	return &ec2v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: ec2v1.EC2NodeClassSpec{AMISelectorTerms: []ec2v1.AMISelectorTerm{{Alias: "al2023@latest"}}, Role: "nodes"},
		Status: ec2v1.EC2NodeClassStatus{
			AMIs:           []ec2v1.AMI{{ID: "ami-arm"}, {ID: "ami-x86"}},
			Subnets:        []ec2v1.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}, {ID: "subnet-b", Zone: "us-east-1b"}},
			SecurityGroups: []ec2v1.SecurityGroup{{ID: "sg-1"}, {ID: "sg-2"}},
		}}
}

// driftClaim is a claim launched from driftPool and driftClass as they are.
func driftClaim() *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x",
		Labels: map[string]string{karpv1.NodePoolLabelKey: "default", karpv1.LabelArch: "arm64", "karpenter.k8s.aws/instance-generation": "4"},
		Annotations: map[string]string{
			karpv1.NodePoolHashAnnotationKey: driftPool().Hash(), karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion,
			ec2v1.AnnotationEC2NodeClassHash: driftClass().Hash(), ec2v1.AnnotationEC2NodeClassHashVersion: ec2v1.EC2NodeClassHashVersion,
			SubnetAnnotation: "subnet-b", SecurityGroupsAnnotation: "sg-2,sg-1",
		}},
		Status: karpv1.NodeClaimStatus{ImageID: "ami-arm"}}
	nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched"})
	return nc
}

func TestDrifted(t *testing.T) {
	cases := []struct {
		name   string
		change func(*karpv1.NodeClaim, *karpv1.NodePool, *ec2v1.EC2NodeClass)
		want   DriftReason // "" for not drifted
		says   string      // in the message
	}{
		{"as launched", func(*karpv1.NodeClaim, *karpv1.NodePool, *ec2v1.EC2NodeClass) {}, "", ""},
		{"pool template label changed", func(_ *karpv1.NodeClaim, p *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			p.Spec.Template.ObjectMeta.Labels["team"] = "b"
		}, NodePoolDrifted, "NodePool default changed"},
		{"pool taint added", func(_ *karpv1.NodeClaim, p *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			p.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		}, NodePoolDrifted, "hashes to"},
		{"pool hash of another version: re-annotated, not drifted", func(c *karpv1.NodeClaim, p *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			p.Spec.Template.ObjectMeta.Labels["team"] = "b"
			c.Annotations[karpv1.NodePoolHashVersionAnnotationKey] = "v3"
		}, "", ""},
		{"pool hash missing", func(c *karpv1.NodeClaim, p *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			p.Spec.Template.ObjectMeta.Labels["team"] = "b"
			delete(c.Annotations, karpv1.NodePoolHashAnnotationKey)
		}, "", ""},
		{"requirement narrowed", func(_ *karpv1.NodeClaim, p *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			p.Spec.Template.Spec.Requirements[0].Values = []string{"amd64"}
		}, RequirementsDrifted, "requires kubernetes.io/arch In amd64; the NodeClaim has kubernetes.io/arch=arm64"},
		{"numeric requirement", func(_ *karpv1.NodeClaim, p *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			p.Spec.Template.Spec.Requirements[1].Values = []string{"5"}
		}, RequirementsDrifted, "instance-generation Gt 5"},
		{"requirement on a label the claim lacks", func(_ *karpv1.NodeClaim, p *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			p.Spec.Template.Spec.Requirements = append(p.Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "example.com/team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}})
		}, RequirementsDrifted, "has no label example.com/team"},
		{"multi-valued requirement the claim is not labelled for but its spec meets", func(c *karpv1.NodeClaim, p *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			c.Spec.Requirements = append(c.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "example.com/team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}})
			p.Spec.Template.Spec.Requirements = append(p.Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "example.com/team", Operator: corev1.NodeSelectorOpIn, Values: []string{"b", "c"}})
		}, "", ""},
		{"requirement the claim's spec no longer meets", func(c *karpv1.NodeClaim, p *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			c.Spec.Requirements = append(c.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "example.com/team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}})
			p.Spec.Template.Spec.Requirements = append(p.Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "example.com/team", Operator: corev1.NodeSelectorOpIn, Values: []string{"c"}})
		}, RequirementsDrifted, "requires example.com/team In c; the NodeClaim has no label example.com/team"},
		{"NotIn on a label the claim lacks", func(_ *karpv1.NodeClaim, p *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			p.Spec.Template.Spec.Requirements = append(p.Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "example.com/team", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"c"}})
		}, "", ""},
		{"DoesNotExist on a label the claim has", func(c *karpv1.NodeClaim, _ *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			c.Labels["example.com/gpu"] = "yes"
		}, RequirementsDrifted, "example.com/gpu DoesNotExist"},
		{"requirement widened", func(_ *karpv1.NodeClaim, p *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			p.Spec.Template.Spec.Requirements[0].Values = []string{"amd64", "arm64"}
		}, "", ""},
		{"class spec changed", func(_ *karpv1.NodeClaim, _ *karpv1.NodePool, c *ec2v1.EC2NodeClass) {
			c.Spec.Role = "other"
		}, NodeClassDrift, "EC2NodeClass default changed"},
		{"class selector terms changed, same resolution", func(_ *karpv1.NodeClaim, _ *karpv1.NodePool, c *ec2v1.EC2NodeClass) {
			c.Spec.SubnetSelectorTerms = []ec2v1.SubnetSelectorTerm{{ID: "subnet-b"}}
		}, "", ""},
		{"class hash of another version", func(nc *karpv1.NodeClaim, _ *karpv1.NodePool, c *ec2v1.EC2NodeClass) {
			c.Spec.Role = "other"
			nc.Annotations[ec2v1.AnnotationEC2NodeClassHashVersion] = "v6"
		}, "", ""},
		{"AMI no longer resolved", func(_ *karpv1.NodeClaim, _ *karpv1.NodePool, c *ec2v1.EC2NodeClass) {
			c.Status.AMIs = []ec2v1.AMI{{ID: "ami-arm-new"}, {ID: "ami-x86"}}
		}, AMIDrift, "AMI ami-arm is not among those EC2NodeClass default resolves to now (ami-arm-new, ami-x86)"},
		{"AMIs not resolved yet", func(_ *karpv1.NodeClaim, _ *karpv1.NodePool, c *ec2v1.EC2NodeClass) {
			c.Status.AMIs = nil
		}, "", ""},
		{"security group added to the class", func(_ *karpv1.NodeClaim, _ *karpv1.NodePool, c *ec2v1.EC2NodeClass) {
			c.Status.SecurityGroups = append(c.Status.SecurityGroups, ec2v1.SecurityGroup{ID: "sg-3"})
		}, SecurityGroupDrift, "security groups (sg-1, sg-2) are not those EC2NodeClass default resolves to now (sg-1, sg-2, sg-3)"},
		{"security group gone from the class", func(_ *karpv1.NodeClaim, _ *karpv1.NodePool, c *ec2v1.EC2NodeClass) {
			c.Status.SecurityGroups = c.Status.SecurityGroups[:1]
		}, SecurityGroupDrift, "(sg-1)"},
		{"security groups not recorded", func(nc *karpv1.NodeClaim, _ *karpv1.NodePool, c *ec2v1.EC2NodeClass) {
			delete(nc.Annotations, SecurityGroupsAnnotation)
			c.Status.SecurityGroups = c.Status.SecurityGroups[:1]
		}, "", ""},
		{"subnet gone from the class", func(_ *karpv1.NodeClaim, _ *karpv1.NodePool, c *ec2v1.EC2NodeClass) {
			c.Status.Subnets = []ec2v1.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}, {ID: "subnet-c", Zone: "us-east-1b"}}
		}, SubnetDrift, "subnet subnet-b is not among those EC2NodeClass default resolves to now (subnet-a, subnet-c)"},
		{"not launched", func(nc *karpv1.NodeClaim, p *karpv1.NodePool, _ *ec2v1.EC2NodeClass) {
			nc.Status.Conditions = nil
			p.Spec.Template.ObjectMeta.Labels["team"] = "b"
		}, "", ""},
		{"pool first", func(_ *karpv1.NodeClaim, p *karpv1.NodePool, c *ec2v1.EC2NodeClass) {
			p.Spec.Template.ObjectMeta.Labels["team"] = "b"
			c.Status.AMIs = []ec2v1.AMI{{ID: "ami-new"}}
		}, NodePoolDrifted, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claim, pool, class := driftClaim(), driftPool(), driftClass()
			tc.change(claim, pool, class)
			d, drifted := Drifted(claim, pool, class)
			require.Equal(t, tc.want != "", drifted, "%+v", d)
			assert.Equal(t, tc.want, d.Reason)
			assert.Contains(t, d.Message, tc.says)
		})
	}
}

// A nil pool or class is not looked at: a claim whose class is gone is not drifted for it.
func TestDriftedWithoutPoolOrClass(t *testing.T) {
	claim := driftClaim()
	claim.Status.ImageID = "ami-gone"
	_, drifted := Drifted(claim, driftPool(), nil)
	assert.False(t, drifted)
	d, drifted := Drifted(claim, nil, driftClass())
	assert.True(t, drifted)
	assert.Equal(t, AMIDrift, d.Reason)
}

func TestRehash(t *testing.T) {
	pool, class := driftPool(), driftClass()
	assert.Nil(t, Rehash(driftClaim(), pool, class), "up to date")

	// A claim made before hashes were recorded takes the current ones.
	old := driftClaim()
	old.Annotations = nil
	assert.Equal(t, map[string]string{
		karpv1.NodePoolHashAnnotationKey: pool.Hash(), karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion,
		ec2v1.AnnotationEC2NodeClassHash: class.Hash(), ec2v1.AnnotationEC2NodeClassHashVersion: ec2v1.EC2NodeClassHashVersion,
	}, Rehash(old, pool, class))

	// Another version (Karpenter's): re-annotated; a drifted claim keeps its hash, so stays drifted.
	karp := driftClaim()
	karp.Annotations[karpv1.NodePoolHashVersionAnnotationKey] = "v3"
	karp.Annotations[karpv1.NodePoolHashAnnotationKey] = "12345"
	assert.Equal(t, map[string]string{karpv1.NodePoolHashAnnotationKey: pool.Hash(), karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion},
		Rehash(karp, pool, class))
	karp.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: string(NodePoolDrifted)})
	assert.Equal(t, map[string]string{karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}, Rehash(karp, pool, class))
	assert.Nil(t, Rehash(old, nil, nil), "nothing to compare with")
}
