package localcluster

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// The release the peer run names (its cache directory, its CRDs) is the one the module builds.
func TestKarpenterVersionIsTheModulesPin(t *testing.T) {
	root, err := moduleRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "karpenter", "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/karpenter (v\S+)`).FindSubmatch(b)
	require.NotNil(t, m, "modules/karpenter/go.mod requires sigs.k8s.io/karpenter")
	require.Equal(t, KarpenterVersion, string(m[1]))
}
