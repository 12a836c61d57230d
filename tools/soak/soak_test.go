package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/tools/proc"
)

// A short soak against a private stack: 75 s of scaling, spot interruptions and kill -9s,
// seeded so the same faults are drawn each run, with the invariants checked every second and
// once more after the stack settles. Nothing may break, and every kind of fault must really
// have been injected (a soak that injected nothing would pass trivially).
func TestShortSoakBreaksNoInvariant(t *testing.T) {
	root, err := proc.RepoRoot()
	require.NoError(t, err)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out bytes.Buffer
	s, err := startOwnStack(ctx, root, dir, &out, 1)
	require.NoError(t, err, out.String())
	t.Cleanup(s.Stop)
	target, err := s.target()
	require.NoError(t, err)

	rep, err := Run(ctx, target, Options{Duration: 75 * time.Second, Settle: 2 * time.Minute, Seed: 13,
		TickMin: time.Second, TickMax: 3 * time.Second, Progress: 10 * time.Second, Out: &out})
	if rep != nil {
		rep.Print(&out)
	}
	t.Log(out.String())
	require.NoError(t, err)
	if rep.Failed() {
		for _, name := range append(services, "awsemu") {
			if b, err := os.ReadFile(s.procs[name].LogPath); err == nil {
				t.Logf("---- %s log (tail) ----\n%s", name, tail(b, 8000))
			}
		}
	}
	assert.Empty(t, rep.Violations, "no invariant broken")
	assert.True(t, rep.FinalOK, "the final check passes once the stack settles")
	assert.Empty(t, rep.InjectErrors, "every injection went through")
	assert.Zero(t, rep.CheckErrors, "every check could read the cluster and the emulator")
	for _, kind := range []string{FaultScale, FaultInterrupt, FaultKill} {
		assert.Positive(t, rep.Faults[kind], "%s injected at least once", kind)
	}
	assert.Greater(t, rep.Checks, 60, "checked about every second")
}

func tail(b []byte, n int) string {
	if len(b) > n {
		return "…" + string(b[len(b)-n:])
	}
	return string(b)
}

func TestLoopbackOnly(t *testing.T) {
	for _, ok := range []string{"https://127.0.0.1:6443", "http://localhost:4566", "nats://127.0.0.1:4222", "http://[::1]:80",
		"nats://127.0.0.1:4222,nats://127.0.0.2:4222"} {
		assert.NoError(t, loopbackOnly(ok), ok)
	}
	for _, bad := range []string{"https://10.0.0.5:6443", "https://api.example.com", "http://0.0.0.0:4566", "",
		"nats://127.0.0.1:4222,nats://192.168.1.2:4222"} {
		assert.Error(t, loopbackOnly(bad), bad)
	}
}

func TestParseConfigBoundsTheRun(t *testing.T) {
	c, err := parseConfig(nil)
	require.NoError(t, err)
	assert.Equal(t, 20*time.Minute, c.duration)
	assert.NotZero(t, c.seed, "a seed is always chosen and printed")
	c, err = parseConfig([]string{"--duration", "5m", "--seed", "42"})
	require.NoError(t, err)
	assert.Equal(t, uint64(42), c.seed)
	assert.Equal(t, 1, c.replicas, "one replica of every service unless asked")
	c, err = parseConfig([]string{"--replicas", "2"})
	require.NoError(t, err)
	assert.Equal(t, 2, c.replicas)
	for _, bad := range [][]string{{"--duration", "25h"}, {"--duration", "0s"}, {"--settle", "0s"}, {"extra"}, {"--replicas", "0"}, {"--replicas", "6"}} {
		_, err := parseConfig(bad)
		assert.Error(t, err, "%v", bad)
	}
}

// The seed alone fixes every tick's choices, whatever the stack does in between, so --seed
// replays a run's faults; and the test's seed draws every kind early.
func TestSeedFixesTheDraws(t *testing.T) {
	draws := func(seed uint64) []draw {
		s := newSoak(Target{Services: services}, Options{Seed: seed, TickMin: time.Second, TickMax: 3 * time.Second})
		out := make([]draw, 20)
		for i := range out {
			out[i] = s.draw()
		}
		return out
	}
	assert.Equal(t, draws(13), draws(13))
	assert.NotEqual(t, draws(13), draws(14))
	kinds := map[int]bool{}
	for _, d := range draws(13) {
		kinds[d.kind] = true // 0, 1: scale; 2: interrupt; 3: kill
		assert.GreaterOrEqual(t, d.pause, time.Second)
		assert.LessOrEqual(t, d.pause, 3*time.Second)
	}
	assert.True(t, (kinds[0] || kinds[1]) && kinds[2] && kinds[3], "seed 13 draws a scale, an interruption and a kill in its first 20 ticks")
}
