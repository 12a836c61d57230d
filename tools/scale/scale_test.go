package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetwright/fleetwright/tools/e2e"
)

// A short scale run (issue 14) on a stack of its own: 100 pods of every shape end Running, with
// one node per NodeClaim, and the report has what a person reads — the floor, the API calls, the
// bus, each service's memory. No timing is asserted.
func TestScaleRunHundredPods(t *testing.T) {
	s := e2e.NewStack(t, append(append([]string(nil), e2e.Services...), "terminator"))
	pool := filepath.Join(t.TempDir(), "pool.yaml")
	require.NoError(t, os.WriteFile(pool, defaultPool, 0o644))
	s.Apply(pool)
	rc, err := s.Cluster.RESTConfig()
	require.NoError(t, err)
	rc.QPS, rc.Burst = 1000, 2000
	kube, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	admin := map[string]string{}
	for _, svc := range []string{"pod-watcher", "scheduler", "launcher", "terminator"} {
		admin[svc] = s.AdminURL(svc)
	}
	var progress strings.Builder
	r, err := Run(context.Background(), Target{Kube: kube, Client: s.Client, Emu: s.Emu, NATSURL: s.NATSURL, Admin: admin},
		Options{Pods: 100, Mix: DefaultMix, Namespace: "scale", Floor: true, Timeout: 5 * time.Minute, Progress: &progress})
	require.NoError(t, err)
	var summary strings.Builder
	r.Summary(&summary)
	t.Log("\n" + progress.String() + summary.String())

	assert.Empty(t, r.Problems, "every pod Running, one node and one instance per NodeClaim")
	assert.Positive(t, r.Running, "all 100 pods ran")
	assert.Positive(t, r.ClaimCount)
	assert.Equal(t, r.ClaimCount, r.NodeCount)
	assert.Positive(t, r.Floor, "the floor was measured")
	assert.Equal(t, r.NodeCount, r.FloorNodes, "the floor has as many nodes")
	assert.Positive(t, r.APICalls["scheduler"]["create nodeclaims"], "the scheduler's claim creates are counted")
	assert.Positive(t, r.NATSMessages)
	for svc := range admin {
		assert.Positive(t, r.PeakRSSMB[svc], "%s's memory is sampled", svc)
	}
	assert.Regexp(t, `^scale: 100 pods Running in [0-9.]+ s \(floor [0-9.]+ s, ratio [0-9.]+\), \d+ nodes, peak RSS launcher=\d+MB pod-watcher=\d+MB scheduler=\d+MB terminator=\d+MB$`, r.Line())
}

// A service without pprof on its admin port is named, with how to turn it on; one with it gives
// both profiles.
func TestProfilesAreTakenFromTheAdminPort(t *testing.T) {
	with := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "profile of "+r.URL.Path)
	}))
	defer with.Close()
	without := httptest.NewServer(http.NotFoundHandler())
	defer without.Close()
	dir := t.TempDir()
	p, err := startProfiles(context.Background(), dir, 1, map[string]string{"scheduler": with.URL, "launcher": without.URL})
	require.NoError(t, err)
	var out bytes.Buffer
	p.finish(context.Background(), &out)

	for _, name := range []string{"scheduler.cpu.pprof", "scheduler.heap.pprof"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Contains(t, string(b), "/debug/pprof/")
	}
	assert.Contains(t, out.String(), "profile of launcher")
	assert.Contains(t, out.String(), "ENABLE_PROFILING=true")
	assert.NotContains(t, out.String(), "profile of scheduler")
}
