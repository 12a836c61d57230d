package docstest

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/service"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

var update = flag.Bool("update", false, "rewrite docs/settings.md's tables from the services' --help")

// services are the four services, in the order of their flow.
var services = []string{"pod-watcher", "scheduler", "launcher", "terminator"}

// setting is one flag of a service as its --help gives it.
type setting struct {
	Flag, Env, Default, Usage string
}

var (
	flagHead  = regexp.MustCompile(`^  -([a-z][a-z0-9-]*)(?: (\S+))?$`)
	envInText = regexp.MustCompile(`\(env ([A-Z][A-Z0-9_]*)[;)]`)
	defaultOf = regexp.MustCompile(` \(default (.*)\)$`)
)

// helpSettings runs a service's --help in an empty environment (so the defaults are its own)
// and reads its flags, the old names left out.
func helpSettings(t *testing.T, bin string) []setting {
	t.Helper()
	cmd := exec.Command(bin, "--help")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), "%s --help: %s", bin, out.String())
	var s []setting
	lines := strings.Split(out.String(), "\n")
	for i := 0; i < len(lines); i++ {
		m := flagHead.FindStringSubmatch(lines[i])
		if m == nil || i+1 >= len(lines) {
			continue
		}
		usage := strings.TrimSpace(strings.TrimPrefix(lines[i+1], "    \t"))
		st := setting{Flag: "--" + m[1]}
		if d := defaultOf.FindStringSubmatch(usage); d != nil {
			st.Default, usage = strings.Trim(d[1], `"`), strings.TrimSuffix(usage, d[0])
		}
		if e := envInText.FindStringSubmatch(usage); e != nil {
			st.Env = e[1]
		}
		usage = regexp.MustCompile(` ?\(env [A-Z0-9_]+\)`).ReplaceAllString(usage, "")
		usage = regexp.MustCompile(`\(env [A-Z0-9_]+; `).ReplaceAllString(usage, "(")
		st.Usage = usage
		s = append(s, st)
	}
	require.NotEmpty(t, s, "%s --help lists no flags:\n%s", bin, out.String())
	return s
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// buildServices builds the four services once for the package's tests, into a directory the
// test binary removes at its end (TestMain).
func buildServices(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "docstest-"); buildErr != nil {
			return
		}
		args := []string{"build", "-o", binDir + "/"}
		for _, s := range services {
			args = append(args, "./services/"+s)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = e2e.Root(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binDir
}

// karpenterName is the Karpenter setting each of ours replaces (its Helm value, or its
// controller's variable where the chart has no settings.* for it); "" for Fleetwright's own.
var karpenterName = map[string]string{
	"BATCH_IDLE_DURATION":        "`settings.batchIdleDuration`",
	"BATCH_MAX_DURATION":         "`settings.batchMaxDuration`",
	"CLUSTER_NAME":               "`settings.clusterName`",
	"CLUSTER_ENDPOINT":           "`settings.clusterEndpoint` (default here: the kubeconfig's server)",
	"CLUSTER_CA_FILE":            "`settings.clusterCABundle` (Karpenter takes the bundle, this a file)",
	"INTERRUPTION_QUEUE":         "`settings.interruptionQueue` (Karpenter: empty turns interruptions off; here `-` does)",
	"VM_MEMORY_OVERHEAD_PERCENT": "`settings.vmMemoryOverheadPercent`",
	"FEATURE_GATES":              "`settings.featureGates` (SpotToSpotConsolidation only; other gates are refused at start)",
	"PREFERENCE_POLICY":          "`settings.preferencePolicy`",
	"KUBE_CLIENT_QPS":            "`KUBE_CLIENT_QPS` (no `settings.*` key)",
	"KUBE_CLIENT_BURST":          "`KUBE_CLIENT_BURST` (no `settings.*` key)",
	"ENABLE_PROFILING":           "`ENABLE_PROFILING`",
	"ADMIN_ADDR":                 "`METRICS_PORT` and `HEALTH_PROBE_PORT` (one address serves both)",
	"AWS_REGION":                 "the AWS SDK's region, as Karpenter's",
	"CLUSTER_CIDR":               "none: Karpenter always asks EKS DescribeCluster",
	"RESOLVER_TTL":               "`settings.amiRefreshInterval`, `settings.subnetRefreshInterval`",
	"ON_DEMAND_PRICE_REFRESH":    "none: Karpenter's is a fixed 12h, and `settings.isolatedVPC` stops it (here 0 does)",
	"DEFAULT_INSTANCE_PROFILE":   "v0.2x's `aws.defaultInstanceProfile`",
	"LOG_LEVEL":                  "`logLevel` (not under `settings`)",
	"KUBECONFIG":                 "`KUBECONFIG`",
}

// envOnly are settings read from the environment alone, with no flag.
var envOnly = []setting{
	{Env: "NATS_PASSWORD", Usage: "the NATS user's password; never a flag (ps and --help would show it)"},
	{Env: "LOG_LEVEL", Default: "info", Usage: "trace, debug, info, warn or error"},
	{Env: "OTEL_EXPORTER_OTLP_ENDPOINT", Usage: "OTLP endpoint traces are exported to (OpenTelemetry's variable; the OTEL_EXPORTER_OTLP_* family is read); empty: no traces"},
}

// hostName stands for a default that is the machine's host name (a pod's name, deployed).
const hostName = "the host's name"

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	if s == "" {
		return "—"
	}
	return s
}

// settingsTables renders the generated part of docs/settings.md.
func settingsTables(t *testing.T) string {
	dir := buildServices(t)
	host, _ := os.Hostname()
	perService := map[string][]setting{}
	byFlag := map[string]map[string]setting{} // flag → service → setting
	for _, svc := range services {
		for _, s := range helpSettings(t, filepath.Join(dir, svc)) {
			if host != "" && s.Default == host {
				s.Default = hostName
			}
			perService[svc] = append(perService[svc], s)
			if byFlag[s.Flag] == nil {
				byFlag[s.Flag] = map[string]setting{}
			}
			byFlag[s.Flag][svc] = s
		}
	}
	var b strings.Builder
	row := func(s setting, def string) {
		if def != hostName {
			def = codeIf(def)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(codeIf(s.Env)), cell(codeIf(s.Flag)), cell(def), cell(karpenterName[s.Env]), cell(s.Usage))
	}
	header := "| environment | flag | default | Karpenter's | what |\n|---|---|---|---|---|\n"
	b.WriteString("### Every service\n\n" + header)
	for _, f := range slices.Sorted(maps.Keys(byFlag)) {
		if len(byFlag[f]) != len(services) {
			continue
		}
		s := byFlag[f][services[0]]
		defaults := map[string]bool{}
		for _, svc := range services {
			defaults[byFlag[f][svc].Default] = true
		}
		def := s.Default
		if len(defaults) > 1 {
			var parts []string
			for _, svc := range services {
				parts = append(parts, svc+" "+byFlag[f][svc].Default)
			}
			def = strings.Join(parts, ", ")
		}
		row(s, def)
	}
	for _, s := range envOnly {
		row(s, s.Default)
	}
	for _, svc := range services {
		fmt.Fprintf(&b, "\n### %s\n\n%s", svc, header)
		for _, s := range perService[svc] {
			if len(byFlag[s.Flag]) == len(services) {
				continue
			}
			row(s, s.Default)
		}
	}
	b.WriteString("\n### Karpenter's settings Fleetwright does not support\n\n" +
		"Each is refused at start when set to anything but Karpenter's default (`service.UnsupportedKarpenterSettings`).\n\n" +
		"| environment | Karpenter's default | what Fleetwright does instead |\n|---|---|---|\n")
	for _, k := range slices.Sorted(maps.Keys(service.UnsupportedKarpenterSettings)) {
		u := service.UnsupportedKarpenterSettings[k]
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", k, cell(codeIf(u.Default)), cell(u.Instead))
	}
	return b.String()
}

func codeIf(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}

const (
	beginMark = "<!-- settings tables: generated by go test ./tools/docstest -run TestSettingsReference -update -->\n"
	endMark   = "<!-- end of the generated settings tables -->\n"
)

// TestSettingsReference: docs/settings.md lists every setting of every service — flag,
// environment variable, default, the Karpenter setting it replaces — as the services' --help
// gives them, and Karpenter's settings Fleetwright refuses. Every flag follows the one naming
// scheme (service.EnvName).
func TestSettingsReference(t *testing.T) {
	path := filepath.Join(e2e.Root(t), "docs", "settings.md")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(b)
	begin, end := strings.Index(text, beginMark), strings.Index(text, endMark)
	require.True(t, begin >= 0 && end > begin, "docs/settings.md has the generated tables' marks")
	want := settingsTables(t)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(text[:begin+len(beginMark)]+"\n"+want+"\n"+text[end:]), 0o644))
		return
	}
	assert.Equal(t, want, strings.TrimSpace(text[begin+len(beginMark):end])+"\n",
		"docs/settings.md is not the services' --help: go test ./tools/docstest -run TestSettingsReference -update")
}

// TestSettingsNamingScheme: every service flag reads the environment variable its name says
// (service.EnvName: --x-y reads X_Y, but for --region and --prefix).
func TestSettingsNamingScheme(t *testing.T) {
	dir := buildServices(t)
	for _, svc := range services {
		for _, s := range helpSettings(t, filepath.Join(dir, svc)) {
			if s.Flag == "--version" {
				assert.Empty(t, s.Env)
				continue
			}
			assert.Equal(t, service.EnvName(strings.TrimPrefix(s.Flag, "--")), s.Env, "%s %s", svc, s.Flag)
		}
	}
}
