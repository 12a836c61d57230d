package main

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	"github.com/fleetwright/fleetwright/tools/awsemu"
)

// parameter reads an SSM parameter from the emulator, as the launcher does.
func (e *env) parameter(name string) string {
	e.t.Helper()
	out, err := ssm.NewFromConfig(e.awsConfig()).GetParameter(e.ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	require.NoError(e.t, err, name)
	return aws.ToString(out.Parameter.Value)
}

// An al2023@latest class resolves through the public SSM parameters, as Karpenter does, and
// each type launches from the image of its variant: a GPU type from the nvidia image, a Neuron
// type from the neuron image, any other from the standard one. The class's status lists every
// image with the requirements that pick it.
func TestAliasResolvesThroughSSMAndEachTypeLaunchesItsVariant(t *testing.T) {
	e := start(t)
	e.apply(nodeClassManifest("variants", demoRole+"  amiSelectorTerms:\n  - alias: al2023@latest\n"))
	const al2023 = "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/"
	standard, nvidia, neuron := e.parameter(al2023+"x86_64/standard/recommended/image_id"),
		e.parameter(al2023+"x86_64/nvidia/recommended/image_id"), e.parameter(al2023+"x86_64/neuron/recommended/image_id")
	require.Len(t, map[string]bool{standard: true, nvidia: true, neuron: true}, 3, "three distinct images")

	want := map[string]struct{ typ, image string }{
		"default-standard1": {"c5.large", standard},
		"default-nvidia1":   {"g5.xlarge", nvidia},
		"default-neuron1":   {"inf2.xlarge", neuron},
	}
	for claim, w := range want {
		e.launch("variants", claim, w.typ)
	}
	templates := map[string]bool{}
	for claim, w := range want {
		nc := e.claimWhen(claim, 60*time.Second, hasInstance, "launched")
		assert.Equal(t, w.image, nc.Status.ImageID, "%s (%s) records its variant's image", claim, w.typ)
		insts := e.instancesFor(claim)
		require.Len(t, insts, 1, claim)
		assert.Equal(t, w.image, insts[0].ImageID, "%s (%s) launched from its variant's image", claim, w.typ)
		templates[e.templateID(claim)] = true
	}
	assert.Len(t, templates, 3, "one launch template per image")

	gets := e.countCalls(func(c awsemu.Call) bool { return c.Service == "ssm" && c.Action == "GetParameter" })
	assert.GreaterOrEqual(t, gets, 3+5, "besides the test's own three reads, the launcher read the alias's five parameters (x86_64 and arm64 variants) from SSM")

	var class *ec2v1.EC2NodeClass
	require.Eventually(t, func() bool {
		nc, c := e.class("variants", ec2v1.ConditionTypeAMIsReady)
		class = nc
		return c != nil && c.Status == metav1.ConditionTrue && len(nc.Status.AMIs) == 5
	}, 30*time.Second, 100*time.Millisecond, "five images: x86_64 standard, nvidia, neuron; arm64 standard, nvidia")
	reqs := map[string][]corev1.NodeSelectorRequirement{}
	for _, ami := range class.Status.AMIs {
		reqs[ami.ID] = ami.Requirements
	}
	arch := corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}
	assert.Equal(t, []corev1.NodeSelectorRequirement{arch,
		{Key: "karpenter.k8s.aws/instance-accelerator-count", Operator: corev1.NodeSelectorOpDoesNotExist},
		{Key: "karpenter.k8s.aws/instance-gpu-count", Operator: corev1.NodeSelectorOpDoesNotExist}}, reqs[standard])
	assert.Equal(t, []corev1.NodeSelectorRequirement{arch, {Key: "karpenter.k8s.aws/instance-gpu-count", Operator: corev1.NodeSelectorOpExists}}, reqs[nvidia])
	assert.Equal(t, []corev1.NodeSelectorRequirement{arch, {Key: "karpenter.k8s.aws/instance-accelerator-count", Operator: corev1.NodeSelectorOpExists}}, reqs[neuron])
}

// An ssmParameter term launches from the AMI its parameter names; while the parameter is
// missing the class is not Ready and says which parameter it could not find.
func TestSSMParameterTerm(t *testing.T) {
	e := start(t)
	e.apply(nodeClassManifest("byssm", demoRole+"  amiFamily: AL2023\n  amiSelectorTerms:\n  - ssmParameter: /team/node-ami\n"))
	require.Eventually(t, func() bool {
		_, c := e.class("byssm", ec2v1.ConditionTypeAMIsReady)
		return c != nil && c.Status == metav1.ConditionFalse
	}, 30*time.Second, 100*time.Millisecond, "no AMI while the parameter is missing")
	nc, c := e.class("byssm", ec2v1.ConditionTypeAMIsReady)
	assert.Contains(t, c.Message, "SSM parameter /team/node-ami not found")
	assert.Empty(t, nc.Status.AMIs)
	_, ready := e.class("byssm", ec2v1.ConditionTypeReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)

	// An older arm64 release, which no alias would pick.
	imgs, err := ec2.NewFromConfig(e.awsConfig()).DescribeImages(e.ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{
		{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-arm64-standard-1.31-v20250115"}}}})
	require.NoError(t, err)
	require.Len(t, imgs.Images, 1)
	id := aws.ToString(imgs.Images[0].ImageId)
	require.NoError(t, e.emu.PutParameter(e.ctx, "/team/node-ami", id))

	require.Eventually(t, func() bool {
		_, c := e.class("byssm", ec2v1.ConditionTypeReady)
		return c != nil && c.Status == metav1.ConditionTrue
	}, 30*time.Second, 100*time.Millisecond, "Ready once the parameter exists")
	nc, _ = e.class("byssm", ec2v1.ConditionTypeReady)
	require.Len(t, nc.Status.AMIs, 1)
	assert.Equal(t, id, nc.Status.AMIs[0].ID)
	assert.Equal(t, []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}},
		nc.Status.AMIs[0].Requirements, "an ssmParameter image serves every type of its architecture")

	e.launch("byssm", "default-ssm1", "t4g.small")
	assert.Equal(t, id, e.claimWhen("default-ssm1", 60*time.Second, hasInstance, "launched").Status.ImageID)
}

// The SSM parameters of each alias family and the variants their images serve, as Karpenter
// reads them.
func TestAliasParameters(t *testing.T) {
	paths := func(alias string) map[string][]variant {
		ps, err := aliasParameters(alias, "1.32")
		require.NoError(t, err, alias)
		out := map[string][]variant{}
		for _, p := range ps {
			out[p.Path] = p.Variants
		}
		return out
	}
	al2023 := paths("al2023@v20250212")
	assert.Len(t, al2023, 5)
	assert.Equal(t, []variant{variantNvidia},
		al2023["/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.32-v20250212/image_id"])
	assert.Equal(t, map[string][]variant{
		"/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id":       {variantStandard},
		"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id": {variantStandard},
		"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id":   {variantNeuron, variantNvidia},
	}, paths("al2@latest"))
	assert.Equal(t, map[string][]variant{
		"/aws/service/bottlerocket/aws-k8s-1.32/x86_64/1.32.0/image_id":        {variantStandard, variantNeuron},
		"/aws/service/bottlerocket/aws-k8s-1.32/arm64/1.32.0/image_id":         {variantStandard},
		"/aws/service/bottlerocket/aws-k8s-1.32-nvidia/x86_64/1.32.0/image_id": {variantNvidia},
		"/aws/service/bottlerocket/aws-k8s-1.32-nvidia/arm64/1.32.0/image_id":  {variantNvidia},
	}, paths("bottlerocket@v1.32.0"), "the v of a Bottlerocket release is dropped")
	_, err := aliasParameters("al2@latest", "1.33")
	assert.ErrorIs(t, err, errNodeClassInvalid, "no AL2 on 1.33+")
	_, err = aliasParameters("ubuntu@latest", "1.32")
	assert.ErrorIs(t, err, errNodeClassInvalid)

	// Which image serves which type.
	gpu := &catalogv1.InstanceType{Architecture: "amd64", GpuCount: 1}
	inf := &catalogv1.InstanceType{Architecture: "amd64", AcceleratorCount: 1}
	cpu := &catalogv1.InstanceType{Architecture: "amd64"}
	imgs := []image{{ID: "ami-std", Arch: "amd64", Variant: variantStandard}, {ID: "ami-gpu", Arch: "amd64", Variant: variantNvidia},
		{ID: "ami-inf", Arch: "amd64", Variant: variantNeuron}}
	for it, want := range map[*catalogv1.InstanceType]string{gpu: "ami-gpu", inf: "ami-inf", cpu: "ami-std"} {
		got, ok := imageFor(imgs, it)
		require.True(t, ok)
		assert.Equal(t, want, got.ID)
	}
	_, ok := imageFor(imgs, &catalogv1.InstanceType{Architecture: "arm64"})
	assert.False(t, ok, "no arm64 image")
}

// A type no image of the class serves — an arm64 GPU type under al2@latest, whose GPU image is
// x86_64 only — fails its claim with that reason rather than launching from another variant.
func TestTypeWithoutAnImageOfItsVariantFails(t *testing.T) {
	e := start(t)
	e.apply(nodeClassManifest("al2", demoRole+"  amiSelectorTerms:\n  - alias: al2@latest\n"))
	e.launch("al2", "default-g5g1", "g5g.xlarge")
	e.nextFailure("NodeClassInvalid", "no image its amiSelectorTerms resolve to serves instance types [g5g.xlarge]")
	assert.Empty(t, e.instancesFor("default-g5g1"), "nothing was launched")
}
