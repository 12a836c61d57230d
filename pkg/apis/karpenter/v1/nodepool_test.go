package v1

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// DeepCopy must not share the duration, requirements or labels with the original.
func TestDeepCopyDoesNotAlias(t *testing.T) {
	np := &NodePool{Spec: NodePoolSpec{Template: NodeClaimTemplate{
		ObjectMeta: TemplateMeta{Labels: map[string]string{"a": "b"}},
		Spec: NodeClaimTemplateSpec{
			ExpireAfter:  MustParseNillableDuration("720h"),
			Requirements: []NodeSelectorRequirementWithMinValues{{Key: "k", Operator: "In", Values: []string{"v"}}},
		},
	}}}
	cp := np.DeepCopy()
	*cp.Spec.Template.Spec.ExpireAfter.Duration = 0
	cp.Spec.Template.Spec.Requirements[0].Values[0] = "changed"
	cp.Spec.Template.ObjectMeta.Labels["a"] = "changed"
	require.Equal(t, "720h", np.Spec.Template.Spec.ExpireAfter.String())
	require.Equal(t, "v", np.Spec.Template.Spec.Requirements[0].Values[0])
	require.Equal(t, "b", np.Spec.Template.ObjectMeta.Labels["a"])
}
