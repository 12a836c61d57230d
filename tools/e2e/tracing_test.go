package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/localcluster"
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

// A scale-up is one trace in Jaeger, as `make up` runs it and as its HTTP API returns it:
// pod-watcher's batch, the scheduler's decision (its pool, the types it considered, the one it
// chose, the price), the launcher's CreateFleet call and the node's registration, and the
// terminator taking the new claim in its care, all four services under one trace id.
func TestScaleUpTraceInJaeger(t *testing.T) {
	t.Parallel()
	s := e2e.NewStackWith(t, e2e.Options{Services: []string{"pod-watcher", "scheduler", "launcher", "terminator"}, Jaeger: true})
	s.Apply("deploy/examples/v1/default.yaml")
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "2")
	podsRunning(t, s, "app=inflate", 2, 3*time.Minute)

	var trace localcluster.Trace
	var last string
	found := assert.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		traces, err := localcluster.JaegerFind(ctx, s.Jaeger.URL, "scheduler", "scheduler.solve", 20)
		if err != nil {
			last = err.Error()
			return false
		}
		for _, tr := range traces {
			// The search answers with whole traces; the scale-up's is the one whose solve made claims.
			solved := tr.SpansNamed("scheduler.solve")
			if len(solved) == 0 || solved[0].Tags["fleetwright.claims"] == "0" || solved[0].Tags["fleetwright.claims"] == "" {
				continue
			}
			trace, last = tr, abridged(tr)
			services := tr.Services()
			return len(tr.SpansNamed("EC2.CreateFleet")) > 0 && len(tr.SpansNamed("pod-watcher.batch")) > 0 &&
				contains(services, "pod-watcher") && contains(services, "scheduler") && contains(services, "launcher") && contains(services, "terminator")
		}
		return false
	}, 60*time.Second, 500*time.Millisecond, "one trace in Jaeger holds spans of all four services and the CreateFleet call")
	if !found {
		t.Fatalf("the scale-up's trace as Jaeger has it:\n%s", last)
	}
	t.Logf("the scale-up's trace as Jaeger returned it:\n%s", abridged(trace))

	solve := trace.SpansNamed("scheduler.solve")[0]
	assert.Equal(t, "scheduler", solve.Service)
	assert.Contains(t, solve.Tags["fleetwright.pools"], "default", "the pool decided for")
	assert.NotEmpty(t, solve.Tags["fleetwright.instance_types"], "each claim's chosen type")
	assert.NotEmpty(t, solve.Tags["fleetwright.price_usd_per_hour"], "the plan's price")
	claims := trace.SpansNamed("scheduler.nodeclaim")
	require.NotEmpty(t, claims, "the scheduler's nodeclaim span")
	assert.Equal(t, "default", claims[0].Tags["fleetwright.nodepool"])
	assert.Regexp(t, `t4g\.`, claims[0].Tags["fleetwright.instance_types"], "the types it considered")
	assert.NotEmpty(t, claims[0].Tags["fleetwright.price_usd_per_hour"])

	fleet := trace.SpansNamed("EC2.CreateFleet")[0]
	assert.Equal(t, "launcher", fleet.Service)
	assert.Regexp(t, `^t4g\.`, fleet.Tags["fleetwright.instance_type"], "the offering EC2 launched")
	assert.Equal(t, "us-east-1a", fleet.Tags["fleetwright.zone"])
	assert.NotEmpty(t, fleet.Tags["fleetwright.capacity_type"])
	assert.Regexp(t, `^i-`, fleet.Tags["fleetwright.instance_id"])
}

// abridged prints a trace one span a line: service, operation, its fleetwright.* attributes.
func abridged(tr localcluster.Trace) string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s: %s\n", tr.ID, strings.Join(tr.Services(), ", "))
	for _, sp := range tr.Spans {
		var tags []string
		for k, v := range sp.Tags {
			if strings.HasPrefix(k, "fleetwright.") || k == "messaging.destination.name" {
				tags = append(tags, k+"="+v)
			}
		}
		sort.Strings(tags)
		fmt.Fprintf(&b, "  %-12s %-34s %s\n", sp.Service, sp.Operation, strings.Join(tags, " "))
	}
	return b.String()
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }
