package e2e_test

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fleetwright/fleetwright/tools/e2e"
)

// One pending-pod batch is one trace across the separate services: pod-watcher's batch,
// the scheduler's solve and the launcher's launch share its trace id.
func TestOneTraceFromBatchToLaunch(t *testing.T) {
	col := e2e.NewCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200") // export quickly
	s := e2e.NewStack(t, nil)
	s.Apply("deploy/examples/v1/default.yaml")
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "2")
	podsRunning(t, s, "app=inflate", 2, 3*time.Minute)

	found := assert.Eventually(t, func() bool {
		byTrace := map[string]map[string]bool{}
		for _, sp := range col.Spans() {
			if byTrace[sp.TraceID] == nil {
				byTrace[sp.TraceID] = map[string]bool{}
			}
			byTrace[sp.TraceID][sp.Service] = true
		}
		for _, svcs := range byTrace {
			if svcs["pod-watcher"] && svcs["scheduler"] && svcs["launcher"] {
				return true
			}
		}
		return false
	}, 60*time.Second, 250*time.Millisecond, "one trace holds spans of pod-watcher, scheduler and launcher")
	if !found {
		var seen []string
		for _, sp := range col.Spans() {
			seen = append(seen, sp.Service+"/"+sp.Name+"@"+sp.TraceID[:8])
		}
		sort.Strings(seen)
		t.Fatalf("spans seen: %s", strings.Join(seen, ", "))
	}
}
