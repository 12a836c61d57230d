package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/tools/e2e"
)

// subset is the part of Karpenter's suites make test runs (`make karpenter-e2e-subset` runs it
// alone): stable and a few minutes long. The core suite's NodePool validation specs (the API's
// admission rules, as Karpenter's own CRDs have them) and scheduling specs of the provider's
// suite that launch one node each.
var subset = regexp.MustCompile(`^(` +
	`Integration Validation NodePool .*` +
	`|\[Strict\] Scheduling should apply annotations to the node` +
	`|\[Strict\] Scheduling Provisioning should provision a node for naked pods` +
	`|\[Strict\] Scheduling Labels should support well-known labels for instance type selection` +
	`)$`)

// subsetSize is how many specs subset selects, so a spec renamed upstream cannot drop out
// unnoticed.
const subsetSize = 17 + 3

// TestKarpenterSuitesSubset builds Karpenter's suites from the pinned module (the module proxy
// on a fresh machine) and runs the subset against a private stack, through the same harness as
// `make karpenter-e2e`: every spec of it must pass.
func TestKarpenterSuitesSubset(t *testing.T) {
	s := e2e.NewStack(t, []string{"pod-watcher", "scheduler", "launcher", "terminator"})
	target := target{kubeconfig: s.Cluster.Kubeconfig, server: s.Cluster.Server, awsURL: s.EmuURL,
		clusterName: "demo-cluster", kube: s.Client}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	start := time.Now()
	results, err := runSuites(ctx, e2e.Root(t), target, options{
		keep: func(sp spec) bool { return subset.MatchString(sp.name()) },
		work: t.TempDir(),
		out:  logWriter{t},
	})
	require.NoError(t, err)
	t.Logf("the subset took %s, the suites' build included", time.Since(start).Round(time.Second))
	var sb strings.Builder
	printTable(&sb, results)
	t.Log("\n" + sb.String())
	require.Len(t, results, subsetSize, "the subset's specs")
	for _, r := range results {
		require.Equal(t, passed, r.state, "%s: %s", r.spec.name(), r.reason)
	}
}

// logWriter sends the harness's progress to the test's log, a line at a time.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
