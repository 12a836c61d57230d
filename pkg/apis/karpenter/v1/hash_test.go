package v1

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func hashPool() *NodePool {
	labels := map[string]string{}
	for _, k := range []string{"team", "tier", "cost-center", "env", "app"} {
		labels[k] = k + "-value"
	}
	return &NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: NodePoolSpec{Template: NodeClaimTemplate{
			ObjectMeta: TemplateMeta{Labels: labels, Annotations: map[string]string{"example.com/owner": "a"}},
			Spec: NodeClaimTemplateSpec{
				Taints: []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}, {Key: "b", Value: "x", Effect: corev1.TaintEffectNoExecute}},
				Requirements: []NodeSelectorRequirementWithMinValues{
					{Key: LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}},
				NodeClassRef: &NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				ExpireAfter:  DurationOf(720 * time.Hour),
			},
		}},
	}
}

func TestNodePoolHashStable(t *testing.T) {
	a := hashPool()
	require.NotEmpty(t, a.Hash())
	// The same content built again (maps filled in another order) and with its taints listed
	// the other way round.
	b := hashPool()
	b.Spec.Template.ObjectMeta.Labels = map[string]string{}
	for _, k := range []string{"app", "env", "cost-center", "tier", "team"} {
		b.Spec.Template.ObjectMeta.Labels[k] = k + "-value"
	}
	b.Spec.Template.Spec.Taints[0], b.Spec.Template.Spec.Taints[1] = b.Spec.Template.Spec.Taints[1], b.Spec.Template.Spec.Taints[0]
	for range 20 {
		assert.Equal(t, a.Hash(), b.Hash())
	}
	// An empty map is no map; an explicit false is no value, as in Karpenter.
	c := hashPool()
	c.Spec.Template.Spec.StartupTaints = []corev1.Taint{}
	assert.Equal(t, a.Hash(), c.Hash())
}

func TestNodePoolHashFields(t *testing.T) {
	base := hashPool().Hash()
	changed := map[string]func(*NodePool){
		"template label":      func(p *NodePool) { p.Spec.Template.ObjectMeta.Labels["team"] = "b" },
		"template annotation": func(p *NodePool) { p.Spec.Template.ObjectMeta.Annotations["example.com/owner"] = "b" },
		"taint":               func(p *NodePool) { p.Spec.Template.Spec.Taints[0].Value = "v" },
		"startup taint": func(p *NodePool) {
			p.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "s", Effect: corev1.TaintEffectNoSchedule}}
		},
		"node class":  func(p *NodePool) { p.Spec.Template.Spec.NodeClassRef.Name = "other" },
		"expireAfter": func(p *NodePool) { p.Spec.Template.Spec.ExpireAfter = DurationOf(24 * time.Hour) },
		"terminationGracePeriod": func(p *NodePool) {
			p.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Minute}
		},
	}
	for name, mutate := range changed {
		p := hashPool()
		mutate(p)
		assert.NotEqual(t, base, p.Hash(), "changing the %s changes the hash", name)
	}
	same := map[string]func(*NodePool){
		"requirements": func(p *NodePool) {
			p.Spec.Template.Spec.Requirements = append(p.Spec.Template.Spec.Requirements,
				NodeSelectorRequirementWithMinValues{Key: LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}})
		},
		"weight":     func(p *NodePool) { w := int32(50); p.Spec.Weight = &w },
		"limits":     func(p *NodePool) { p.Spec.Limits = Limits{corev1.ResourceCPU: resource.MustParse("10")} },
		"disruption": func(p *NodePool) { p.Spec.Disruption.ConsolidationPolicy = ConsolidationPolicyWhenEmpty },
		"pool metadata": func(p *NodePool) {
			p.Annotations = map[string]string{NodePoolHashAnnotationKey: "1"}
			p.Labels = map[string]string{"x": "y"}
		},
		"expireAfter written longer": func(p *NodePool) { p.Spec.Template.Spec.ExpireAfter = MustParseNillableDuration("720h0m0s") },
	}
	for name, mutate := range same {
		p := hashPool()
		mutate(p)
		assert.Equal(t, base, p.Hash(), "changing the %s leaves the hash", name)
	}
}
