package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// karpenterFamilies are the Karpenter metric families the monitoring component records, with
// the labels Karpenter's dashboards select or group them by. The services serve every other
// family themselves (pkg/karpmetrics), so the component records nothing else.
var karpenterFamilies = map[string][]string{
	"karpenter_build_info": {"version", "goversion", "commit"},
}

// TestMonitoringComponent renders deploy/components/monitoring into a kustomization and checks
// the ServiceMonitor scrapes the four services' metrics ports, and that the PrometheusRule
// records every Karpenter family above from fleetwright_ metrics the code exports, carrying
// the labels Karpenter's dashboards use: kept from the source metric (whose labels are read
// from the code), kept by a `by (...)`, or added by label_replace.
func TestMonitoringComponent(t *testing.T) {
	dir := t.TempDir()
	component := filepath.Join(root(t), "deploy", "components", "monitoring")
	rel, err := filepath.Rel(dir, component)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"),
		[]byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: fleetwright\ncomponents:\n  - "+rel+"\n"), 0o644))
	m := render(t, dir)

	sm := find(t, m, "ServiceMonitor", "fleetwright")
	require.Equal(t, "metrics", field(t, sm, "spec", "endpoints", "[port=metrics]", "port"))
	require.Equal(t, "/metrics", field(t, sm, "spec", "endpoints", "[port=metrics]", "path"))
	// Karpenter's dashboards select job="karpenter".
	require.Equal(t, "job", field(t, sm, "spec", "endpoints", "[port=metrics]", "relabelings", "[targetLabel=job]", "targetLabel"))
	require.Equal(t, "karpenter", field(t, sm, "spec", "endpoints", "[port=metrics]", "relabelings", "[targetLabel=job]", "replacement"))
	base := render(t, filepath.Join(root(t), "deploy", "overlays", "local"))
	for _, s := range services {
		svc := find(t, base, "Service", s+"-metrics")
		require.Equal(t, "fleetwright", field(t, svc, "metadata", "labels", "app.kubernetes.io/part-of"), s)
		require.NotEmpty(t, field(t, svc, "spec", "ports", "[name=metrics]", "port"), "%s-metrics has the port the ServiceMonitor scrapes", s)
		require.Contains(t, field(t, sm, "spec", "selector", "matchExpressions", "[key=app.kubernetes.io/name]", "values"), s)
	}

	rule := find(t, m, "PrometheusRule", "fleetwright-karpenter")
	var spec struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	s, err := rule.Pipe(yaml.Lookup("spec"))
	require.NoError(t, err)
	str, err := s.String()
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal([]byte(str), &spec))
	exprs := map[string]string{}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			require.NotContains(t, exprs, r.Record, "%s is recorded once", r.Record)
			require.Contains(t, karpenterFamilies, r.Record, "%s is served by the services themselves (pkg/karpmetrics): "+
				"recording it too would give it a second set of series", r.Record)
			exprs[r.Record] = r.Expr
		}
	}
	labels := metricLabels(t)
	series := regexp.MustCompile(`fleetwright_[a-z0-9_]+`)
	by := regexp.MustCompile(`by \(([^)]*)\)`)
	added := regexp.MustCompile(`label_replace\([^"]*"([a-z_]+)"`)
	for family, want := range karpenterFamilies {
		expr, ok := exprs[family]
		require.True(t, ok, "%s is recorded", family)
		names := series.FindAllString(expr, -1)
		require.NotEmpty(t, names, "%s is recorded from a fleetwright_ metric", family)
		var have []string
		for _, n := range names {
			metric := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if _, ok := labels[metric]; !ok {
					metric = strings.TrimSuffix(metric, suffix)
				}
			}
			src, ok := labels[metric]
			require.True(t, ok, "%s is recorded from %s, which no service exports", family, n)
			have = append(have, src...)
			if strings.HasSuffix(n, "_bucket") {
				have = append(have, "le")
			}
		}
		if m := by.FindStringSubmatch(expr); m != nil {
			var kept []string
			for _, l := range strings.Split(m[1], ",") {
				l = strings.TrimSpace(l)
				require.Contains(t, have, l, "%s groups by %s, which its source metric lacks", family, l)
				kept = append(kept, l)
			}
			have = kept
		}
		for _, m := range added.FindAllStringSubmatch(expr, -1) {
			have = append(have, m[1])
		}
		for _, l := range want {
			require.True(t, slices.Contains(have, l), "%s lacks the label %s Karpenter's dashboards use (expr %q)", family, l, expr)
		}
	}
}
