package deploytest

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exportedMetrics finds every fleetwright_ metric name declared in the Go sources of pkg/ and
// services/ (Name: "fleetwright_..." in a prometheus.*Opts).
func exportedMetrics(t *testing.T) map[string]bool {
	re := regexp.MustCompile(`Name:\s*"(fleetwright_[a-z0-9_]+)"`)
	out := map[string]bool{}
	for _, dir := range []string{"pkg", "services"} {
		err := filepath.WalkDir(filepath.Join(root(t), dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				out[m[1]] = true
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, out)
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
