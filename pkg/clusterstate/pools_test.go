package clusterstate

import "testing"

// Issue 31, item 10: a claim's pool is read one way by every service: the v1 label, else the
// v1alpha5 one (the launcher read only the first).
func TestPoolOf(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"karpenter.sh/nodepool": "a"}, "a"},
		{map[string]string{"karpenter.sh/provisioner-name": "legacy"}, "legacy"},
		{map[string]string{"karpenter.sh/nodepool": "a", "karpenter.sh/provisioner-name": "legacy"}, "a"},
		{nil, ""},
	} {
		if got := PoolOf(tc.labels); got != tc.want {
			t.Errorf("PoolOf(%v) = %q, want %q", tc.labels, got, tc.want)
		}
	}
}
