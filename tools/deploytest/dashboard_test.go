package deploytest

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exportedMetrics finds every fleetwright_ metric name declared in the Go sources of pkg/ and
// services/ (Name: "fleetwright_..." in a prometheus.*Opts, or prometheus.NewDesc("fleetwright_...")).
func exportedMetrics(t *testing.T) map[string]bool {
	out := map[string]bool{}
	for name := range metricLabels(t) {
		out[name] = true
	}
	require.NotEmpty(t, out)
	return out
}

// metricLabels maps each fleetwright_ metric declared in the Go sources of pkg/ and services/
// to its label names: the first []string{...} after its name (a *Vec's or NewDesc's variable
// labels) and the keys of a prometheus.Labels{...} (constant labels), up to the next
// declaration.
func metricLabels(t *testing.T) map[string][]string {
	decl := regexp.MustCompile(`(?:Name:\s*|NewDesc\(\s*)"(fleetwright_[a-z0-9_]+)"`)
	list := regexp.MustCompile(`\[\]string\{([^}]*)\}|prometheus\.Labels\{([^}]*)\}`)
	quoted := regexp.MustCompile(`"([a-z_]+)"\s*(:?)`)
	out := map[string][]string{}
	for _, dir := range []string{"pkg", "services"} {
		err := filepath.WalkDir(filepath.Join(root(t), dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			src := string(b)
			decls := decl.FindAllStringSubmatchIndex(src, -1)
			for i, m := range decls {
				name, end := src[m[2]:m[3]], len(src)
				if i+1 < len(decls) {
					end = decls[i+1][0]
				}
				labels := []string{}
				for _, l := range list.FindAllStringSubmatch(src[m[1]:end], -1) {
					if l[1] != "" {
						for _, q := range quoted.FindAllStringSubmatch(l[1], -1) {
							labels = append(labels, q[1])
						}
						break // a metric's variable labels are its first list
					}
					for _, q := range quoted.FindAllStringSubmatch(l[2], -1) {
						if q[2] == ":" {
							labels = append(labels, q[1])
						}
					}
				}
				out[name] = labels
			}
			return nil
		})
		require.NoError(t, err)
	}
	return out
}

// TestDashboardUsesExportedMetrics: the Grafana dashboard is valid JSON and every fleetwright_
// series it queries is one the services export (histograms by their _bucket series).
func TestDashboardUsesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "grafana", "fleetwright-dashboard.json"))
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(b, &d))
	require.NotEmpty(t, d.Panels)
	exported := exportedMetrics(t)
	series := regexp.MustCompile(`fleetwright_[a-z0-9_]+`)
	used := map[string]bool{}
	for _, p := range d.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			names := series.FindAllString(tg.Expr, -1)
			require.NotEmpty(t, names, p.Title)
			for _, n := range names {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
				require.True(t, exported[base], "panel %q queries %s, which no service exports", p.Title, n)
				used[base] = true
			}
		}
	}
	for _, want := range []string{"fleetwright_pending_pods", "fleetwright_scheduler_scheduling_duration_seconds",
		"fleetwright_launcher_create_fleet_errors_total", "fleetwright_interruption_messages_total", "fleetwright_terminator_drain_seconds"} {
		require.True(t, used[want], "the dashboard shows %s", want)
	}
}

// TestDashboardPlotsWhatItsTitlesSay: a panel whose title names quantiles (p50, p95, ...) has
// exactly one histogram_quantile target for each and none other; a "/ s" panel plots rates;
// a lag panel plots the consumers' lag; a "usage and limit" panel plots both. And the dashboard
// has a consumer lag panel.
func TestDashboardPlotsWhatItsTitlesSay(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "grafana", "fleetwright-dashboard.json"))
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(b, &d))
	titleQ := regexp.MustCompile(`\bp(\d{2})\b`)
	exprQ := regexp.MustCompile(`histogram_quantile\(0\.(\d+),`)
	lag := false
	for _, p := range d.Panels {
		var want, got []string
		for _, m := range titleQ.FindAllStringSubmatch(p.Title, -1) {
			want = append(want, strings.TrimRight(m[1], "0"))
		}
		for _, tg := range p.Targets {
			for _, m := range exprQ.FindAllStringSubmatch(tg.Expr, -1) {
				got = append(got, strings.TrimRight(m[1], "0"))
			}
			if strings.Contains(p.Title, "/ s") {
				require.Contains(t, tg.Expr, "rate(", "panel %q plots a rate", p.Title)
			}
		}
		sort.Strings(want)
		sort.Strings(got)
		require.Equal(t, want, got, "panel %q: the quantiles its title names are the ones it plots", p.Title)
		if strings.Contains(strings.ToLower(p.Title), "lag") {
			lag = true
			for _, tg := range p.Targets {
				require.Contains(t, tg.Expr, "fleetwright_bus_consumer_lag_messages", "panel %q plots consumer lag", p.Title)
			}
		}
		if strings.Contains(p.Title, "usage and limit") {
			require.Len(t, p.Targets, 2, p.Title)
			require.Contains(t, p.Targets[0].Expr+p.Targets[1].Expr, "_usage", p.Title)
			require.Contains(t, p.Targets[0].Expr+p.Targets[1].Expr, "_limit", p.Title)
		}
	}
	require.True(t, lag, "the dashboard has a consumer lag panel")
}
