package deploytest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/localcluster/clustertest"
)

func TestMain(m *testing.M) { clustertest.Main(m) }

// TestOverlaysServerSideDryRun applies every rendered overlay to the local control plane with
// server-side dry-run (after the CRDs are installed and the namespace exists), so the API
// server validates every object: schemas, CRD instances, RBAC, probes, security contexts.
func TestOverlaysServerSideDryRun(t *testing.T) {
	c := e2e.Cluster(t)
	// Namespaced objects need their namespace to exist even in a dry run.
	_, err := e2e.Kubectl(c, "apply", "--server-side", "-f", filepath.Join(root(t), "deploy", "base", "common", "namespace.yaml"))
	require.NoError(t, err)
	for _, o := range overlays(t) {
		t.Run(o, func(t *testing.T) {
			m := render(t, filepath.Join(root(t), "deploy", "overlays", o))
			out, err := m.AsYaml()
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), o+".yaml")
			require.NoError(t, os.WriteFile(path, out, 0o600))
			res, err := e2e.Kubectl(c, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", path)
			require.NoError(t, err, res)
			require.Contains(t, res, "deployment.apps/scheduler serverside-applied (server dry run)")
			require.Contains(t, res, "statefulset.apps/nats serverside-applied (server dry run)")
		})
	}
}
