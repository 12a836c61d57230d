package deploytest

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exportedMetrics finds every fleetwright_ metric name declared in the Go sources of pkg/ and
// services/ (see metricLabels).
func exportedMetrics(t *testing.T) map[string]bool {
	out := map[string]bool{}
	for name := range metricLabels(t) {
		out[name] = true
	}
	require.NotEmpty(t, out)
	return out
}

// metricLabels maps each fleetwright_ metric declared in the Go sources of pkg/ and services/
// to its label names. It reads the three ways a metric is declared there:
//   - service.Metrics: m.CounterVec("fleetwright_…", help, "label", …) (and Counter, Gauge,
//     GaugeVec, Histogram, HistogramVec): the string arguments after the help;
//   - prometheus.NewXxx(prometheus.XxxOpts{Name: "fleetwright_…", ConstLabels: …}, []string{…});
//   - prometheus.NewDesc("fleetwright_…", help, []string{…}, prometheus.Labels{…}).
func metricLabels(t *testing.T) map[string][]string {
	helpers := map[string]bool{"Counter": true, "CounterVec": true, "Gauge": true, "GaugeVec": true, "Histogram": true, "HistogramVec": true}
	out := map[string][]string{}
	for _, dir := range []string{"pkg", "services"} {
		err := filepath.WalkDir(filepath.Join(root(t), dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch name, isName := metricName(call.Args[0]); {
				case isName && helpers[sel.Sel.Name] && len(call.Args) > 1:
					out[name] = stringArgs(call.Args[2:])
				case isName && sel.Sel.Name == "NewDesc":
					out[name] = labelsIn(call.Args[1:])
				case strings.HasPrefix(sel.Sel.Name, "New"):
					opts, ok := call.Args[0].(*ast.CompositeLit)
					if u, isRef := call.Args[0].(*ast.UnaryExpr); isRef {
						opts, ok = u.X.(*ast.CompositeLit)
					}
					if !ok {
						return true
					}
					var labels []string
					for _, el := range opts.Elts {
						kv, ok := el.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						switch key := fmt.Sprint(kv.Key); key {
						case "Name":
							name, isName = metricName(kv.Value)
						case "ConstLabels":
							labels = append(labels, labelsIn([]ast.Expr{kv.Value})...)
						}
					}
					if isName {
						out[name] = append(labels, labelsIn(call.Args[1:])...)
					}
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	return out
}

// metricName is a string literal's value when it names a fleetwright_ metric.
func metricName(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil && strings.HasPrefix(v, "fleetwright_")
}

// stringArgs are the values of the string literals among args.
func stringArgs(args []ast.Expr) []string {
	out := []string{}
	for _, a := range args {
		if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			v, _ := strconv.Unquote(lit.Value)
			out = append(out, v)
		}
	}
	return out
}

// labelsIn reads label names from []string{…} (variable labels) and prometheus.Labels{…}
// (constant labels: the keys) among args.
func labelsIn(args []ast.Expr) []string {
	out := []string{}
	for _, a := range args {
		lit, ok := a.(*ast.CompositeLit)
		if !ok {
			continue
		}
		for _, el := range lit.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				out = append(out, stringArgs([]ast.Expr{kv.Key})...)
			} else {
				out = append(out, stringArgs([]ast.Expr{el})...)
			}
		}
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
