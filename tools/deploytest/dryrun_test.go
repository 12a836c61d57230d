package deploytest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/localcluster"
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

// certManager is the cert-manager release whose CRDs the dry-run validates the Certificate
// and Issuers against (read from its Go module: the proxy serves it, no registry needed).
const certManager = "github.com/cert-manager/cert-manager@v1.21.2"

// certManagerCRDs installs cert-manager's Certificate and Issuer CRDs, from its module.
func certManagerCRDs(t *testing.T, c *localcluster.Cluster) {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", certManager)
	cmd.Dir = t.TempDir() // outside the workspace
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	require.NoError(t, err, "go mod download %s", certManager)
	var mod struct{ Dir string }
	require.NoError(t, json.Unmarshal(out, &mod))
	for _, crd := range []string{"cert-manager.io_certificates.yaml", "cert-manager.io_issuers.yaml", "cert-manager.io_clusterissuers.yaml"} {
		res, err := e2e.Kubectl(c, "apply", "--server-side", "-f", filepath.Join(mod.Dir, "deploy", "crds", crd))
		require.NoError(t, err, res)
	}
	res, err := e2e.Kubectl(c, "wait", "--for", "condition=Established", "--timeout", "60s", "crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io")
	require.NoError(t, err, res)
}

// TestPrerequisitesServerSideDryRun: the EKS prerequisites deploy/ ships pass the API server's
// validation: the gp3 StorageClass, and the eks overlay with the nats-tls-cert-manager
// component, its Certificates and Issuers checked against cert-manager's own CRDs.
func TestPrerequisitesServerSideDryRun(t *testing.T) {
	c := e2e.Cluster(t)
	_, err := e2e.Kubectl(c, "apply", "--server-side", "-f", filepath.Join(root(t), "deploy", "base", "common", "namespace.yaml"))
	require.NoError(t, err)
	certManagerCRDs(t, c)
	res, err := e2e.Kubectl(c, "apply", "--server-side", "--dry-run=server", "-f", filepath.Join(root(t), "deploy", "prerequisites", "gp3-storageclass.yaml"))
	require.NoError(t, err, res)
	require.Contains(t, res, "storageclass.storage.k8s.io/gp3 serverside-applied (server dry run)")

	out, err := render(t, eksWithCertManager(t)).AsYaml()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "eks.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	res, err = e2e.Kubectl(c, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", path)
	require.NoError(t, err, res)
	require.Contains(t, res, "certificate.cert-manager.io/nats-tls serverside-applied (server dry run)")
	require.Contains(t, res, "issuer.cert-manager.io/fleetwright-nats-ca serverside-applied (server dry run)")
}
