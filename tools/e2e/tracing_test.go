package e2e_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// A spot interruption is one trace from the SQS message through the drain to
// TerminateInstances, across the poller and the executor.
func TestOneTraceFromInterruptionToTermination(t *testing.T) {
	col := e2e.NewCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
	s := e2e.NewStack(t, append(append([]string{}, e2e.Services...), "terminator"))
	s.Apply("deploy/examples/v1/default.yaml")
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "1")
	podsRunning(t, s, "app=inflate", 1, 3*time.Minute)
	claims := s.NodeClaims(t)
	require.NotEmpty(t, claims)
	id := claims[0].Status.ProviderID[strings.LastIndex(claims[0].Status.ProviderID, "/")+1:]
	require.NoError(t, s.Emu.Interrupt(context.Background(), "spot-interruption", id))

	found := assert.Eventually(t, func() bool {
		names := map[string]map[string]bool{}
		for _, sp := range col.Spans() {
			if sp.Service != "terminator" {
				continue
			}
			if names[sp.TraceID] == nil {
				names[sp.TraceID] = map[string]bool{}
			}
			names[sp.TraceID][sp.Name] = true
		}
		for _, n := range names {
			if n["terminator.interruption"] && n["terminator.drain"] && n["terminator.terminate-instance"] {
				return true
			}
		}
		return false
	}, 90*time.Second, 250*time.Millisecond, "interruption, drain and TerminateInstances share one trace")
	if !found {
		var seen []string
		for _, sp := range col.Spans() {
			seen = append(seen, sp.Service+"/"+sp.Name+"@"+sp.TraceID[:8])
		}
		sort.Strings(seen)
		t.Fatalf("spans seen: %s", strings.Join(seen, ", "))
	}
}
