package e2e_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// servedFamilies is every metric family the running services serve, by name, with the services
// that serve it.
type servedFamilies map[string]map[string]*dto.MetricFamily

// scrapeFamilies reads and parses each service's /metrics.
func scrapeFamilies(t *testing.T, s *e2e.Stack, services ...string) servedFamilies {
	t.Helper()
	out := servedFamilies{}
	for _, svc := range services {
		resp, err := http.Get(s.AdminURL(svc) + "/metrics")
		require.NoError(t, err, svc)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		require.NoError(t, err, "%s's /metrics is Prometheus text", svc)
		for name, f := range fams {
			if out[name] == nil {
				out[name] = map[string]*dto.MetricFamily{}
			}
			out[name][svc] = f
		}
	}
	return out
}

// total is the sum over every service's series of a family, with the labels given (name=value):
// a counter's or gauge's value, a histogram's or summary's count.
func (f servedFamilies) total(name string, labels ...string) float64 {
	var sum float64
	for _, fam := range f[name] {
		for _, m := range fam.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			case m.GetSummary() != nil:
				sum += float64(m.GetSummary().GetSampleCount())
			}
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, labels []string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for _, kv := range labels {
		k, v, _ := strings.Cut(kv, "=")
		if have[k] != v {
			return false
		}
	}
	return true
}

// servers names the services that serve a family with at least one series.
func (f servedFamilies) servers(name string) []string {
	var out []string
	for svc, fam := range f[name] {
		if len(fam.GetMetric()) > 0 {
			out = append(out, svc)
		}
	}
	sort.Strings(out)
	return out
}

// What a team moving from Karpenter opens first: its capacity and performance dashboards. After
// a scale-up and a consolidation on the running system, every metric those dashboards query is
// served by some service, under Karpenter's name, with values that say what happened.
func TestKarpenterDashboardMetricsAreServed(t *testing.T) {
	t.Parallel()
	s := v1Stack(t, `{"disruption":{"consolidateAfter":"10s"}}`)
	// A DaemonSet, so that every node has daemon requests to show.
	createDaemonSet(t, s, "agent", podOpts{resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}})
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "9")
	podsRunning(t, s, "app=inflate", 9, 3*time.Minute)
	launched := len(launchedNodes(t, s))
	keepOnePerNode(t, s, "app=inflate")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "3")
	want := freshPlanVCPUs(t, s, 3)
	require.Eventually(t, func() bool {
		nodes := launchedNodes(t, s)
		return len(nodes) > 0 && vCPUs(nodes) <= want
	}, 4*time.Minute, 500*time.Millisecond, "the cluster consolidates")
	podsRunning(t, s, "app=inflate", 3, 2*time.Minute)

	services := []string{"pod-watcher", "scheduler", "launcher", "terminator"}
	var f servedFamilies
	// The cluster's gauges are the scheduler leader's view, refreshed on its pass: wait for the
	// pass that sees the consolidated cluster.
	require.Eventually(t, func() bool {
		f = scrapeFamilies(t, s, services...)
		return f.total("karpenter_nodes_terminated_total") >= 1 && f.total("karpenter_pods_state", "phase=Running") >= 3 &&
			f.total("karpenter_nodeclaims_disrupted_total", "reason=underutilized") >= 1
	}, 2*time.Minute, time.Second, "the scraped metrics show the consolidation")

	for _, name := range karpmetrics.DashboardFamilies {
		servers := f.servers(name)
		if assert.NotEmpty(t, servers, "%s, which Karpenter's dashboards read, is served by no service", name) {
			t.Logf("%-50s served by %s", name, strings.Join(servers, ", "))
		}
	}
	// Values that say what happened: nodes made and removed, the decision that removed them, the
	// pods' startups, the pool's usage within its limits.
	assert.GreaterOrEqual(t, f.total("karpenter_nodes_created_total"), float64(launched), "a node created for each launched")
	assert.GreaterOrEqual(t, f.total("karpenter_nodeclaims_disrupted_total", "reason=underutilized"), 1.0)
	assert.GreaterOrEqual(t, f.total("karpenter_voluntary_disruption_decisions_total", "reason=underutilized"), 1.0)
	assert.GreaterOrEqual(t, f.total("karpenter_nodes_termination_duration_seconds"), 1.0)
	assert.GreaterOrEqual(t, f.total("karpenter_pods_startup_duration_seconds"), 9.0, "each inflate pod's startup observed")
	assert.Greater(t, f.total("karpenter_nodes_allocatable", "resource_type=cpu"), 0.0)
	assert.GreaterOrEqual(t, f.total("karpenter_nodes_total_daemon_requests", "resource_type=cpu"), 0.1, "the agent's 100m on each node")
	assert.GreaterOrEqual(t, f.total("karpenter_nodes_total_pod_requests", "resource_type=cpu"), 3.0, "3 one-CPU pods")
	assert.Greater(t, f.total("karpenter_nodepools_usage", "nodepool=default", "resource_type=cpu"), 0.0)
	assert.Equal(t, 20.0, f.total("karpenter_nodepools_limit", "nodepool=default", "resource_type=cpu"), "the example pool's limit")
	assert.Greater(t, f.total("controller_runtime_reconcile_total"), 0.0)
	assert.Greater(t, f.total("controller_runtime_reconcile_time_seconds"), 0.0)
	// And ours beside them.
	assert.Greater(t, f.total("fleetwright_scheduler_batches_total"), 0.0)
}
