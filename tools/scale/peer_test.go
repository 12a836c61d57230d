package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/localcluster"
)

// The side-by-side harness (issue 30) on a stack of its own, 100 pods: Karpenter's kwok provider
// schedules every pod in Fleetwright's place, and Fleetwright gets its cluster back — its CRDs
// (a field only Karpenter's define is refused again), its services, a fleet of its own — and
// schedules every pod too. No timing is asserted.
func TestPeerRunHundredPods(t *testing.T) {
	services := append(append([]string(nil), e2e.Services...), "terminator")
	s := e2e.NewStack(t, services)
	s.Apply(writeTemp(t, defaultPool))
	rc, err := s.Cluster.RESTConfig()
	require.NoError(t, err)
	rc.QPS, rc.Burst = 1000, 2000
	kube, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	admin := map[string]string{}
	for _, svc := range services {
		admin[svc] = s.AdminURL(svc)
	}
	ctx := context.Background()
	zones, err := emulatorZones(ctx, s.EmuURL, s.Region())
	require.NoError(t, err)
	var progress strings.Builder
	ps := PeerStack{
		Kubeconfig: s.Cluster.Kubeconfig,
		Kubectl: func(ctx context.Context, stdin []byte, args ...string) (string, error) {
			return kubectl(ctx, map[string]string{"KUBECONFIG": s.Cluster.Kubeconfig, "PATH": filepath.Dir(s.Cluster.Kubectl())}, stdin, args...)
		},
		Hold: func(ctx context.Context) error {
			for _, svc := range services {
				s.Service(svc).Kill()
			}
			return waitAdmin(ctx, admin, false, time.Minute)
		},
		Release: func(ctx context.Context) error {
			for _, svc := range []string{"pod-watcher", "launcher", "terminator", "scheduler"} {
				s.StartService(svc)
			}
			return waitAdmin(ctx, admin, true, 3*time.Minute)
		},
		Root: e2e.Root(t), Dir: t.TempDir(), Region: s.Region(), Zones: zones, Out: &progress,
	}
	tg := Target{Kube: kube, Client: s.Client, Emu: s.Emu, NATSURL: s.NATSURL, Admin: admin}
	opts := Options{Pods: 100, Mix: DefaultMix, Namespace: "scale", Timeout: 5 * time.Minute, Progress: &progress}

	bctx, cancel := context.WithTimeout(ctx, time.Hour) // a cold build of Karpenter takes minutes
	_, err = localcluster.EnsureKarpenterKwok(bctx, &progress)
	cancel()
	require.NoError(t, err, progress.String())
	kr, err := RunKarpenter(ctx, ps, tg, opts, defaultPool)
	require.NoError(t, err, progress.String())
	r, err := Run(ctx, tg, opts)
	require.NoError(t, err)
	var summary strings.Builder
	kr.Summary(&summary)
	r.Summary(&summary)
	t.Log("\n" + progress.String() + summary.String() + PeerLine(kr, r))

	assert.Empty(t, kr.Problems, "karpenter: every pod Running, one node per NodeClaim")
	assert.Positive(t, kr.Running, "karpenter ran all 100 pods")
	assert.Positive(t, kr.NodeCount)
	assert.Positive(t, kr.PeakRSSMB["karpenter"], "karpenter's memory is sampled")
	assert.Positive(t, totalCalls(kr.APICalls["karpenter"]), "karpenter's API calls are counted")
	assert.Empty(t, r.Problems, "fleetwright: every pod Running, one node and one instance per NodeClaim")
	assert.Positive(t, r.Running, "fleetwright ran all 100 pods")
	assert.Regexp(t, `^peer: 100 pods Running — karpenter [0-9.]+ s, fleetwright [0-9.]+ s, speed-up [0-9.]+$`, PeerLine(kr, r))

	// Fleetwright's cluster is its own again: its NodeClaims were all made by its scheduler (on
	// its pool), Karpenter's pool and node class and their CRD are gone, and its CRDs refuse
	// what only Karpenter's accept.
	var claims karpv1.NodeClaimList
	require.NoError(t, s.Client.List(ctx, &claims))
	for _, c := range claims.Items {
		assert.Equal(t, "scale", c.Labels[karpv1.NodePoolLabelKey], "claim %s", c.Name)
	}
	out, err := e2e.Kubectl(s.Cluster, "get", "crd", "-o", "name")
	require.NoError(t, err)
	assert.NotContains(t, out, "kwoknodeclasses.karpenter.kwok.sh")
	var pools karpv1.NodePoolList
	require.NoError(t, s.Client.List(ctx, &pools))
	for _, p := range pools.Items {
		assert.NotEqual(t, PeerPool, p.Name)
	}
	out, err = e2e.Kubectl(s.Cluster, "apply", "--dry-run=server", "-f", writeTemp(t, []byte(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: static}
spec:
  replicas: 2
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
`)))
	require.Error(t, err, "our NodePool CRD refuses spec.replicas again: %s", out)
	assert.Contains(t, out, "replicas")
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: karpv1.NodePoolLabelKey + "=" + PeerPool})
	require.NoError(t, err)
	assert.Empty(t, nodes.Items, "karpenter's nodes are gone")
}

// The catalog Karpenter is offered is the one Fleetwright plans with: the same types and prices,
// and after Karpenter's kwok overhead the same allocatable.
func TestKarpenterIsOfferedFleetwrightsCatalog(t *testing.T) {
	b, err := karpenterInstanceTypes("us-east-1", []string{"us-east-1a", "us-east-1b"})
	require.NoError(t, err)
	var types []kwokInstanceType
	require.NoError(t, json.Unmarshal(b, &types))
	require.NotEmpty(t, types)
	byName := map[string]kwokInstanceType{}
	for _, kt := range types {
		byName[kt.Name] = kt
	}
	m5, ok := byName["m5.large"]
	require.True(t, ok, "m5.large is offered")
	var ours scheduling.InstanceType
	for _, it := range scheduling.FromCatalog(catalog.Schedulable(), nil) {
		if it.Name == "m5.large" {
			ours = it
		}
	}
	alloc := ours.Allocatable()
	assert.Equal(t, alloc[scheduling.ResourceCPU]+100, m5.Resources.Cpu().MilliValue(), "cpu: our allocatable plus kwok's 100m")
	assert.Equal(t, alloc[scheduling.ResourceMemory]+10*scheduling.MiB, m5.Resources.Memory().Value(), "memory: our allocatable plus kwok's 10Mi")
	assert.Equal(t, alloc[scheduling.ResourcePods], m5.Resources.Pods().Value())
	assert.Len(t, m5.Offerings, 4, "on demand and spot in each of two zones")
	for _, o := range m5.Offerings {
		if o.Requirements[0].Values[0] == scheduling.CapacityTypeOnDemand {
			assert.InDelta(t, 0.096, o.Price, 1e-9, "m5.large's us-east-1 on-demand price")
		}
	}
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "manifest.yaml")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func totalCalls(m map[string]float64) float64 {
	total := 0.0
	for _, v := range m {
		total += v
	}
	return total
}
