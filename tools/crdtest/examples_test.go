package crdtest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/ec2/v1alpha1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
	"github.com/fleetwright/fleetwright/pkg/apis/translate"
)

// All five CRDs are served, cluster-scoped, in the karpenter category, EC2NodeClass with
// Karpenter's short names; the kustomization lists exactly the generated files.
func TestCRDsServed(t *testing.T) {
	e := cluster(t)
	require.ElementsMatch(t, []string{
		"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "provisioners.karpenter.sh",
		"ec2nodeclasses.karpenter.k8s.aws", "awsnodetemplates.karpenter.k8s.aws",
	}, e.crds)

	cfg, err := e.cluster.RESTConfig()
	require.NoError(t, err)
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	want := map[string]map[string][]string{ // group/version -> resource -> short names
		"karpenter.sh/v1":            {"nodepools": nil, "nodeclaims": nil},
		"karpenter.sh/v1alpha5":      {"provisioners": nil},
		"karpenter.k8s.aws/v1":       {"ec2nodeclasses": {"ec2nc", "ec2ncs"}},
		"karpenter.k8s.aws/v1alpha1": {"awsnodetemplates": nil},
	}
	for gv, resources := range want {
		list, err := disco.ServerResourcesForGroupVersion(gv)
		require.NoError(t, err, gv)
		for name, shortNames := range resources {
			i := slices.IndexFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == name })
			require.GreaterOrEqual(t, i, 0, "%s not served in %s", name, gv)
			r := list.APIResources[i]
			require.False(t, r.Namespaced, name)
			require.Equal(t, shortNames, r.ShortNames, name)
			require.Equal(t, []string{"karpenter"}, r.Categories, name)
			require.True(t, slices.ContainsFunc(list.APIResources, func(s metav1.APIResource) bool { return s.Name == name+"/status" }),
				"%s has a status subresource", name)
		}
	}

	// The kustomization builds to the same five CRDs, and the server takes them.
	out, stderr, err := e.kubectl(t, "", "apply", "-k", repoRoot+"/deploy/crds", "--dry-run=server")
	require.NoError(t, err, stderr)
	require.Equal(t, 5, strings.Count(out, "customresourcedefinition.apiextensions.k8s.io/"), out)
}

// deploy/examples/v1/default.yaml applies unchanged (kubectl's default strict validation),
// reads back into the Go types with the defaults the schema fills in, and applies again as
// unchanged.
func TestV1ExampleAppliesUnchanged(t *testing.T) {
	e := cluster(t)
	out, stderr, err := e.kubectl(t, "", "apply", "-f", example("v1/default.yaml"))
	require.NoError(t, err, stderr)
	require.Empty(t, stderr, "no warnings")
	require.Contains(t, out, "ec2nodeclass.karpenter.k8s.aws/default created")
	require.Contains(t, out, "nodepool.karpenter.sh/default created")
	e.deleteLater(t, gvrNodePool, "default")
	e.deleteLater(t, gvrEC2NodeClass, "default")

	var nc ec2v1.EC2NodeClass
	e.get(t, gvrEC2NodeClass, "default", &nc)
	require.Equal(t, "AL2023", *nc.Spec.AMIFamily)
	require.Equal(t, "AL2023", nc.ResolvedAMIFamily())
	require.Equal(t, []ec2v1.AMISelectorTerm{{Alias: "al2023@latest"}}, nc.Spec.AMISelectorTerms)
	discovery := map[string]string{"karpenter.sh/discovery": "demo-cluster"}
	require.Equal(t, []ec2v1.SubnetSelectorTerm{{Tags: discovery}}, nc.Spec.SubnetSelectorTerms)
	require.Equal(t, []ec2v1.SecurityGroupSelectorTerm{{Tags: discovery}}, nc.Spec.SecurityGroupSelectorTerms)
	require.Equal(t, "KarpenterNodeRole-demo-cluster", nc.Spec.Role)
	require.NotNil(t, nc.Spec.MetadataOptions, "defaulted by the schema")
	require.Equal(t, int64(1), *nc.Spec.MetadataOptions.HTTPPutResponseHopLimit)
	require.Equal(t, "required", *nc.Spec.MetadataOptions.HTTPTokens)

	var np karpv1.NodePool
	e.get(t, gvrNodePool, "default", &np)
	tmpl := np.Spec.Template.Spec
	require.Equal(t, &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}, tmpl.NodeClassRef)
	require.Equal(t, 720*time.Hour, *tmpl.ExpireAfter.Duration)
	require.Equal(t, 10*time.Minute, tmpl.TerminationGracePeriod.Duration)
	require.Len(t, tmpl.Requirements, 6)
	require.Equal(t, karpv1.NodeSelectorRequirementWithMinValues{
		Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"},
	}, tmpl.Requirements[3])
	require.Equal(t, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, np.Spec.Disruption.ConsolidationPolicy)
	require.Equal(t, 10*time.Minute, *np.Spec.Disruption.ConsolidateAfter.Duration)
	require.Equal(t, []karpv1.Budget{{Nodes: "10%"}}, np.Spec.Disruption.Budgets, "defaulted by the schema")
	cpu, mem := np.Spec.Limits[corev1.ResourceCPU], np.Spec.Limits[corev1.ResourceMemory]
	require.Equal(t, int64(20), cpu.Value())
	require.Equal(t, "80Gi", mem.String())
	require.Nil(t, np.Spec.Weight)

	out, stderr, err = e.kubectl(t, "", "apply", "-f", example("v1/default.yaml"))
	require.NoError(t, err, stderr)
	require.Contains(t, out, "nodepool.karpenter.sh/default unchanged")
	require.Contains(t, out, "ec2nodeclass.karpenter.k8s.aws/default unchanged")
}

// deploy/examples/v1alpha5/default.yaml applies unchanged and reads back; its translation
// into v1 objects is accepted by the server (dry run, strict field validation).
func TestV1Alpha5ExampleAppliesAndTranslates(t *testing.T) {
	e := cluster(t)
	out, stderr, err := e.kubectl(t, "", "apply", "-f", example("v1alpha5/default.yaml"))
	require.NoError(t, err, stderr)
	require.Empty(t, stderr, "no warnings")
	require.Contains(t, out, "provisioner.karpenter.sh/default created")
	require.Contains(t, out, "awsnodetemplate.karpenter.k8s.aws/default created")
	e.deleteLater(t, gvrProvisioner, "default")
	e.deleteLater(t, gvrAWSNodeTemplate, "default")

	var p v1alpha5.Provisioner
	e.get(t, gvrProvisioner, "default", &p)
	require.Equal(t, []v1alpha5.NodeSelectorRequirement{
		{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}},
	}, p.Spec.Requirements)
	cpu := p.Spec.Limits.Resources[corev1.ResourceCPU]
	require.Equal(t, int64(1000), cpu.Value())
	require.Equal(t, "default", p.Spec.ProviderRef.Name)
	require.Equal(t, int64(30), *p.Spec.TTLSecondsAfterEmpty)

	var tmpl v1alpha1.AWSNodeTemplate
	e.get(t, gvrAWSNodeTemplate, "default", &tmpl)
	require.Equal(t, map[string]string{"karpenter.sh/discovery": "demo-cluster"}, tmpl.Spec.SubnetSelector)
	require.Equal(t, map[string]string{"karpenter.sh/discovery": "demo-cluster"}, tmpl.Spec.SecurityGroupSelector)

	np, err := translate.NodePool(&p)
	require.NoError(t, err)
	nc, err := translate.EC2NodeClass(&tmpl, translate.Options{DefaultInstanceProfile: "KarpenterNodeInstanceProfile-demo-cluster"})
	require.NoError(t, err)
	require.Equal(t, karpv1.ConsolidationPolicyWhenEmpty, np.Spec.Disruption.ConsolidationPolicy)
	require.Equal(t, 30*time.Second, *np.Spec.Disruption.ConsolidateAfter.Duration)
	require.Equal(t, nc.Name, np.Spec.Template.Spec.NodeClassRef.Name)

	// Renamed so the dry run does not meet the v1 example's objects of the same name.
	np.Name, nc.Name, np.Spec.Template.Spec.NodeClassRef.Name = "from-v1alpha5", "from-v1alpha5", "from-v1alpha5"
	created, err := e.create(t, gvrEC2NodeClass, nc, true)
	require.NoError(t, err, "translated EC2NodeClass should be valid")
	require.Equal(t, "from-v1alpha5", created.GetName())
	created, err = e.create(t, gvrNodePool, np, true)
	require.NoError(t, err, "translated NodePool should be valid")
	expire, _, err := unstructured.NestedString(created.Object, "spec", "template", "spec", "expireAfter")
	require.NoError(t, err)
	require.Equal(t, "Never", expire)
	_, err = e.dynamic.Resource(gvrNodePool).Get(context.Background(), "from-v1alpha5", metav1.GetOptions{})
	require.Error(t, err, "a dry run stores nothing")
}
