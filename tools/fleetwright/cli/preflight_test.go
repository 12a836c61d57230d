package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/localcluster/clustertest"
)

func TestMain(m *testing.M) { clustertest.Main(m) }

// karpenterNodePoolCRD is nodepools.karpenter.sh as a Karpenter release left it: storage
// version storage, the others served beside it, owned by the Helm release karpenter-crd.
func karpenterNodePoolCRD(storage string, served ...string) string {
	var versions strings.Builder
	for _, v := range append([]string{storage}, served...) {
		versions.WriteString("  - name: " + v + "\n    served: true\n    storage: " + map[bool]string{true: "true", false: "false"}[v == storage] +
			"\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n")
	}
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: nodepools.karpenter.sh
  annotations:
    meta.helm.sh/release-name: karpenter-crd
spec:
  group: karpenter.sh
  scope: Cluster
  names: {kind: NodePool, listKind: NodePoolList, plural: nodepools, singular: nodepool}
  versions:
` + versions.String()
}

// TestPreflightRefusesStoredV1beta1 replays a cluster that went through Karpenter v0.33–v1.0 on
// the real kube-apiserver: a NodePool stored as v1beta1, then the CRD moved to storage v1, so
// status.storedVersions is [v1beta1 v1]. preflight fails and prints the remediation; the API
// server does refuse Fleetwright's CRD then (the check is not stricter than it); the printed
// commands, run as printed, migrate the object and the CRD; preflight then passes and
// Fleetwright's CRD applies.
func TestPreflightRefusesStoredV1beta1(t *testing.T) {
	c := clustertest.Get(t)
	dir := t.TempDir()
	apply := func(name, manifest string) (string, error) {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(manifest), 0o600))
		return e2e.Kubectl(c, "apply", "--server-side", "--force-conflicts", "-f", path)
	}
	t.Cleanup(func() { _, _ = e2e.Kubectl(c, "delete", "crd", "nodepools.karpenter.sh", "--ignore-not-found") })

	_, err := apply("v1beta1.yaml", karpenterNodePoolCRD("v1beta1"))
	require.NoError(t, err)
	_, err = e2e.Kubectl(c, "wait", "--for", "condition=Established", "--timeout", "60s", "crd/nodepools.karpenter.sh")
	require.NoError(t, err)
	_, err = apply("pool.yaml", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata:\n  name: legacy\nspec:\n  disruption:\n    consolidationPolicy: WhenUnderutilized\n")
	require.NoError(t, err)
	_, err = apply("v1.yaml", karpenterNodePoolCRD("v1", "v1beta1")) // Karpenter v1.0: v1 stored, v1beta1 still served
	require.NoError(t, err)

	preflight := func() (int, string) {
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		code := runContext(ctx, []string{"preflight", "--kubeconfig", c.Kubeconfig}, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	code, out := preflight()
	require.Equal(t, 1, code, out)
	assert.Contains(t, out, "FAIL  nodepools.karpenter.sh")
	assert.Contains(t, out, "status.storedVersions [v1beta1 v1]")
	assert.Contains(t, out, "ok    nodeclaims.karpenter.sh")
	assert.Contains(t, out, `belongs to the Helm release "karpenter-crd"`)
	assert.Contains(t, out, "Karpenter v1.0.2 and later v1.0.x patches migrate by themselves")

	crd, err := os.ReadFile(filepath.Join(e2e.Root(t), "deploy", "crds", "karpenter.sh_nodepools.yaml"))
	require.NoError(t, err)
	refused, err := apply("fleetwright.yaml", string(crd))
	require.Error(t, err, "the API server refuses a CRD that drops a stored version")
	assert.Contains(t, refused, "storedVersions")
	t.Logf("preflight said:\n%s\nthe API server said: %s", out, refused)

	// The remediation, exactly as printed (steps 2 and 3), with this cluster's kubectl.
	steps := regexp.MustCompile(`(?m)^  [23]\. (kubectl .*)$`).FindAllStringSubmatch(out, -1)
	require.Len(t, steps, 2, out)
	for _, step := range steps {
		cmd := exec.Command("sh", "-c", step[1])
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "PATH="+filepath.Dir(c.Kubectl())+":"+os.Getenv("PATH"))
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", step[1], b)
	}

	code, out = preflight()
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "ok    nodepools.karpenter.sh")
	assert.Contains(t, out, "status.storedVersions [v1]")
	assert.Contains(t, out, "ready: kubectl apply")
	_, err = apply("fleetwright.yaml", string(crd))
	require.NoError(t, err, "Fleetwright's CRD applies once v1beta1 is no longer stored")
	got, err := e2e.Kubectl(c, "get", "nodepool", "legacy", "-o", "jsonpath={.apiVersion}")
	require.NoError(t, err)
	assert.Equal(t, "karpenter.sh/v1", got, "the object survived the switch")
}

// TestServedVersionsAreDeployCRDs: preflight's table of served versions is deploy/crds.
func TestServedVersionsAreDeployCRDs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(e2e.Root(t), "deploy", "crds", "*_*.yaml"))
	require.NoError(t, err)
	got := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var crd struct {
			Metadata struct{ Name string }
			Spec     struct {
				Versions []struct {
					Name   string
					Served bool
				}
			}
		}
		require.NoError(t, yaml.Unmarshal(b, &crd))
		for _, v := range crd.Spec.Versions {
			if v.Served {
				got[crd.Metadata.Name] = append(got[crd.Metadata.Name], v.Name)
			}
		}
	}
	assert.Equal(t, ServedVersions, got)
}

// TestKubectlRunsThePlugin installs the plugin the way the docs say (go install from a
// checkout) and lets the real kubectl find it on PATH: `kubectl fleetwright version` and
// `kubectl fleetwright preflight` run it, with kubectl's KUBECONFIG.
func TestKubectlRunsThePlugin(t *testing.T) {
	c := clustertest.Get(t)
	bin := t.TempDir()
	install := exec.Command("go", "install", "./tools/kubectl-fleetwright")
	install.Dir = e2e.Root(t)
	install.Env = append(os.Environ(), "GOBIN="+bin)
	b, err := install.CombinedOutput()
	require.NoError(t, err, "go install ./tools/kubectl-fleetwright: %s", b)
	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(c.Kubectl(), args...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "KUBECONFIG="+c.Kubeconfig, "FLEETWRIGHT_STATE="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := kubectl("plugin", "list")
	require.NoError(t, err, out)
	assert.Contains(t, out, filepath.Join(bin, "kubectl-fleetwright"))
	out, err = kubectl("fleetwright", "version")
	require.NoError(t, err, out)
	assert.Regexp(t, `^kubectl fleetwright dev \(commit `, out)
	out, err = kubectl("fleetwright", "preflight")
	require.NoError(t, err, out)
	assert.Contains(t, out, "ok    nodeclaims.karpenter.sh")
}
