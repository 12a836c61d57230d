package deploytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// services are Fleetwright's four deployables.
var services = []string{"pod-watcher", "scheduler", "launcher", "terminator"}

// overlays lists deploy/overlays/*.
func overlays(t testing.TB) []string {
	entries, err := os.ReadDir(filepath.Join(root(t), "deploy", "overlays"))
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	require.NotEmpty(t, out)
	return out
}

// render builds one kustomization with the kustomize API (the version kubectl 1.32 embeds).
func render(t testing.TB, dir string) resmap.ResMap {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "rendering %s", dir)
	return m
}

func find(t testing.TB, m resmap.ResMap, kind, name string) *yaml.RNode {
	t.Helper()
	for _, r := range m.Resources() {
		if r.GetKind() == kind && r.GetName() == name {
			n, err := yaml.Parse(r.MustYaml())
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s %s in the rendered output", kind, name)
	return nil
}

func field(t testing.TB, n *yaml.RNode, path ...string) string {
	t.Helper()
	v, err := n.Pipe(yaml.Lookup(path...))
	require.NoError(t, err)
	if v == nil {
		return ""
	}
	s, err := v.String()
	require.NoError(t, err)
	return strings.TrimSpace(s)
}

// TestOverlaysRender renders every overlay and checks what each must hold — NATS with three
// replicas, and per service a Deployment with probes on the admin port, limits, a
// read-only non-root container kept off managed nodes, its ServiceAccount, RBAC, metrics
// Service and PodDisruptionBudget.
func TestOverlaysRender(t *testing.T) {
	for _, o := range overlays(t) {
		t.Run(o, func(t *testing.T) {
			m := render(t, filepath.Join(root(t), "deploy", "overlays", o))
			nats := find(t, m, "StatefulSet", "nats")
			require.Equal(t, "3", field(t, nats, "spec", "replicas"))
			require.Equal(t, "fleetwright", field(t, nats, "metadata", "namespace"))
			for _, s := range services {
				d := find(t, m, "Deployment", s)
				c := field(t, d, "spec", "template", "spec", "containers", "[name="+s+"]", "livenessProbe", "httpGet", "path")
				require.Equal(t, "/healthz", c, s)
				require.Equal(t, "/readyz", field(t, d, "spec", "template", "spec", "containers", "[name="+s+"]", "readinessProbe", "httpGet", "path"), s)
				require.NotEmpty(t, field(t, d, "spec", "template", "spec", "containers", "[name="+s+"]", "resources", "limits", "memory"), s)
				require.Equal(t, "true", field(t, d, "spec", "template", "spec", "containers", "[name="+s+"]", "securityContext", "readOnlyRootFilesystem"), s)
				require.Equal(t, "true", field(t, d, "spec", "template", "spec", "securityContext", "runAsNonRoot"), s)
				require.Equal(t, s, field(t, d, "spec", "template", "spec", "serviceAccountName"), s)
				aff := field(t, d, "spec", "template", "spec", "affinity", "nodeAffinity")
				require.Contains(t, aff, "karpenter.sh/nodepool", s)
				require.Contains(t, aff, "DoesNotExist", s)
				require.NotEmpty(t, field(t, d, "spec", "replicas"), s)
				find(t, m, "ServiceAccount", s)
				find(t, m, "ClusterRole", "fleetwright-"+s)
				find(t, m, "ClusterRoleBinding", "fleetwright-"+s)
				find(t, m, "Service", s+"-metrics")
				find(t, m, "PodDisruptionBudget", s)
			}
		})
	}
}

// TestCRDsAreTheirOwnStep: deploy/crds holds Karpenter's five CRDs, and no overlay holds any,
// so deleting an overlay (kubectl delete -k) never deletes a CRD, and with it every NodeClaim.
func TestCRDsAreTheirOwnStep(t *testing.T) {
	m := render(t, filepath.Join(root(t), "deploy", "crds"))
	for _, crd := range []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws",
		"provisioners.karpenter.sh", "awsnodetemplates.karpenter.k8s.aws"} {
		find(t, m, "CustomResourceDefinition", crd)
	}
	require.Len(t, m.Resources(), 5)
	for _, o := range overlays(t) {
		for _, r := range render(t, filepath.Join(root(t), "deploy", "overlays", o)).Resources() {
			require.NotEqual(t, "CustomResourceDefinition", r.GetKind(), "overlay %s holds %s", o, r.GetName())
		}
	}
}

// TestEKSOverlaySettings: IRSA roles for the two services that call AWS only, and the cluster
// settings from settings.env.
func TestEKSOverlaySettings(t *testing.T) {
	m := render(t, filepath.Join(root(t), "deploy", "overlays", "eks"))
	for _, s := range []string{"launcher", "terminator"} {
		require.Contains(t, field(t, find(t, m, "ServiceAccount", s), "metadata", "annotations", "eks.amazonaws.com/role-arn"), "fleetwright-"+s)
	}
	for _, s := range []string{"pod-watcher", "scheduler"} {
		require.Empty(t, field(t, find(t, m, "ServiceAccount", s), "metadata", "annotations", "eks.amazonaws.com/role-arn"), "%s has no AWS role", s)
	}
	var settings *yaml.RNode
	for _, r := range m.Resources() {
		if r.GetKind() == "ConfigMap" && strings.HasPrefix(r.GetName(), "fleetwright-settings") {
			n, err := yaml.Parse(r.MustYaml())
			require.NoError(t, err)
			settings = n
		}
	}
	require.NotNil(t, settings)
	require.Equal(t, "my-cluster", field(t, settings, "data", "CLUSTER_NAME"))
	require.Equal(t, "fleetwright-my-cluster", field(t, settings, "data", "INTERRUPTION_QUEUE"))
	require.Contains(t, field(t, settings, "data", "CLUSTER_ENDPOINT"), "eks.amazonaws.com")
	require.Equal(t, "tls", field(t, settings, "data", "NATS_SCHEME"))
	natsConfig := ""
	for _, r := range m.Resources() {
		if r.GetKind() == "ConfigMap" && strings.HasPrefix(r.GetName(), "nats-config") {
			natsConfig = r.MustYaml()
		}
	}
	require.Contains(t, natsConfig, "cert_file: /etc/nats-tls/tls.crt", "the TLS component enables client TLS")
}

// TestSchedulerPodRights: the scheduler reads pods through its informer (list, watch) and never
// writes them: nominations are recorded on its NodeClaims.
func TestSchedulerPodRights(t *testing.T) {
	m := render(t, filepath.Join(root(t), "deploy", "base", "scheduler"))
	role := find(t, m, "ClusterRole", "fleetwright-scheduler")
	var cr struct {
		Rules []struct {
			APIGroups []string `yaml:"apiGroups"`
			Resources []string `yaml:"resources"`
			Verbs     []string `yaml:"verbs"`
		} `yaml:"rules"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(role.MustString()), &cr))
	var verbs []string
	for _, r := range cr.Rules {
		for _, res := range r.Resources {
			if res == "pods" && len(r.APIGroups) == 1 && r.APIGroups[0] == "" {
				verbs = append(verbs, r.Verbs...)
			}
		}
	}
	require.ElementsMatch(t, []string{"list", "watch"}, verbs)
}
