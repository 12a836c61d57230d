package translate

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
)

// provisioner is the getting-started Provisioner (deploy/examples/v1alpha5/default.yaml),
// changed by opts.
func provisioner(opts ...func(*v1alpha5.ProvisionerSpec)) *v1alpha5.Provisioner {
	p := &v1alpha5.Provisioner{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha5.ProvisionerSpec{
			Requirements: []v1alpha5.NodeSelectorRequirement{
				{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}},
			},
			Limits:               &v1alpha5.Limits{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}},
			ProviderRef:          &v1alpha5.MachineTemplateRef{Name: "default"},
			TTLSecondsAfterEmpty: ptrTo[int64](30),
		},
	}
	for _, o := range opts {
		o(&p.Spec)
	}
	return p
}

func TestNodePool(t *testing.T) {
	ref := &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	cases := []struct {
		name  string
		in    *v1alpha5.Provisioner
		check func(t *testing.T, np *karpv1.NodePool)
	}{
		{"getting started", provisioner(), func(t *testing.T, np *karpv1.NodePool) {
			require.Equal(t, "default", np.Name)
			require.Equal(t, "karpenter.sh/v1", np.APIVersion)
			require.Equal(t, "NodePool", np.Kind)
			require.Equal(t, ref, np.Spec.Template.Spec.NodeClassRef)
			require.Equal(t, []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}},
				{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
				{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
				{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
				{Key: "karpenter.k8s.aws/instance-generation", Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}},
			}, np.Spec.Template.Spec.Requirements, "v1alpha5's admission defaults for every key the Provisioner leaves unsaid")
			require.Equal(t, karpv1.ConsolidationPolicyWhenEmpty, np.Spec.Disruption.ConsolidationPolicy)
			require.Equal(t, "30s", np.Spec.Disruption.ConsolidateAfter.String())
			require.Equal(t, []karpv1.Budget{{Nodes: "10%"}}, np.Spec.Disruption.Budgets)
			require.True(t, np.Spec.Template.Spec.ExpireAfter.IsNever(), "v1alpha5 never expired nodes by default")
			q := np.Spec.Limits[corev1.ResourceCPU]
			require.Equal(t, int64(1000), q.Value())
			require.Equal(t, map[string]string{"karpenter.sh/provisioner-name": "default"}, np.Spec.Template.ObjectMeta.Labels)
			require.Nil(t, np.Spec.Weight)
			require.Empty(t, np.Annotations)
		}},
		{"a provisioner that picks types or names a key keeps its choice, no defaults for it", provisioner(func(s *v1alpha5.ProvisionerSpec) {
			s.Requirements = []v1alpha5.NodeSelectorRequirement{
				{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"t3"}},
				{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64", "amd64"}},
			}
		}), func(t *testing.T, np *karpv1.NodePool) {
			require.Equal(t, []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"t3"}},
				{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64", "amd64"}},
				{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
				{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
			}, np.Spec.Template.Spec.Requirements)
		}},
		{"consolidation enabled", provisioner(func(s *v1alpha5.ProvisionerSpec) {
			s.TTLSecondsAfterEmpty = nil
			s.Consolidation = &v1alpha5.Consolidation{Enabled: ptrTo(true)}
		}), func(t *testing.T, np *karpv1.NodePool) {
			require.Equal(t, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, np.Spec.Disruption.ConsolidationPolicy)
			require.Equal(t, "0s", np.Spec.Disruption.ConsolidateAfter.String())
		}},
		{"consolidation disabled and no emptiness ttl: never", provisioner(func(s *v1alpha5.ProvisionerSpec) {
			s.TTLSecondsAfterEmpty = nil
			s.Consolidation = &v1alpha5.Consolidation{Enabled: ptrTo(false)}
		}), func(t *testing.T, np *karpv1.NodePool) {
			require.True(t, np.Spec.Disruption.ConsolidateAfter.IsNever())
		}},
		{"expiry, weight, labels, annotations, taints", provisioner(func(s *v1alpha5.ProvisionerSpec) {
			s.TTLSecondsUntilExpired = ptrTo[int64](2592000)
			s.Weight = ptrTo[int32](50)
			s.Labels = map[string]string{"team": "a"}
			s.Annotations = map[string]string{"example.com/owner": "a"}
			s.Taints = []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}}
			s.StartupTaints = []corev1.Taint{{Key: "cni", Effect: corev1.TaintEffectNoExecute}}
		}), func(t *testing.T, np *karpv1.NodePool) {
			require.Equal(t, "720h", np.Spec.Template.Spec.ExpireAfter.String())
			require.Equal(t, int32(50), *np.Spec.Weight)
			require.Equal(t, map[string]string{"team": "a", "karpenter.sh/provisioner-name": "default"}, np.Spec.Template.ObjectMeta.Labels)
			require.Equal(t, map[string]string{"example.com/owner": "a"}, np.Spec.Template.ObjectMeta.Annotations)
			require.Equal(t, []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}}, np.Spec.Template.Spec.Taints)
			require.Equal(t, []corev1.Taint{{Key: "cni", Effect: corev1.TaintEffectNoExecute}}, np.Spec.Template.Spec.StartupTaints)
		}},
		{"kubelet moves to an annotation", provisioner(func(s *v1alpha5.ProvisionerSpec) {
			s.KubeletConfiguration = &v1alpha5.KubeletConfiguration{
				MaxPods:        ptrTo[int32](20),
				SystemReserved: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				EvictionHard:   map[string]string{"memory.available": "5%"},
			}
		}), func(t *testing.T, np *karpv1.NodePool) {
			k, err := KubeletOf(np)
			require.NoError(t, err)
			require.Equal(t, &ec2v1.KubeletConfiguration{
				MaxPods:        ptrTo[int32](20),
				SystemReserved: map[string]string{"cpu": "100m"},
				EvictionHard:   map[string]string{"memory.available": "5%"},
			}, k)
		}},
		{"inline provider: class named after the provisioner", provisioner(func(s *v1alpha5.ProvisionerSpec) {
			s.ProviderRef = nil
			s.Provider = &runtime.RawExtension{Raw: []byte(`{"subnetSelector":{"a":"b"}}`)}
		}), func(t *testing.T, np *karpv1.NodePool) {
			require.Equal(t, ref, np.Spec.Template.Spec.NodeClassRef)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np, err := NodePool(tc.in)
			require.NoError(t, err)
			tc.check(t, np)
		})
	}
}

func TestNodePoolErrors(t *testing.T) {
	cases := []struct {
		name string
		in   *v1alpha5.Provisioner
		want string
	}{
		{"ttl and consolidation", provisioner(func(s *v1alpha5.ProvisionerSpec) {
			s.Consolidation = &v1alpha5.Consolidation{Enabled: ptrTo(true)}
		}), "mutually exclusive"},
		{"no template", provisioner(func(s *v1alpha5.ProvisionerSpec) { s.ProviderRef = nil }), "neither providerRef nor provider"},
		{"both templates", provisioner(func(s *v1alpha5.ProvisionerSpec) {
			s.Provider = &runtime.RawExtension{Raw: []byte(`{}`)}
		}), "provider and providerRef are mutually exclusive"},
		{"other kind", provisioner(func(s *v1alpha5.ProvisionerSpec) { s.ProviderRef.Kind = "GCENodeTemplate" }), "only AWSNodeTemplate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NodePool(tc.in)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "translating provisioner default")
		})
	}
}

// The translation must not share memory with its input: the services cache both.
func TestNodePoolDoesNotAlias(t *testing.T) {
	p := provisioner(func(s *v1alpha5.ProvisionerSpec) {
		s.Labels = map[string]string{"team": "a"}
		s.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	})
	np, err := NodePool(p)
	require.NoError(t, err)
	np.Spec.Template.Spec.Requirements[0].Values[0] = "changed"
	np.Spec.Template.ObjectMeta.Labels["team"] = "changed"
	np.Spec.Template.Spec.Taints[0].Key = "changed"
	require.Equal(t, "spot", p.Spec.Requirements[0].Values[0])
	require.Equal(t, "a", p.Spec.Labels["team"])
	require.Equal(t, "k", p.Spec.Taints[0].Key)
}
