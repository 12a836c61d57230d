package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Each spec's saved result comes back for --resume with the commit it was measured at; a batch
// run again for some of its specs keeps the others' results; a spec the batch could not run is
// not saved (so --resume runs it).
func TestSavedResultsResumeSpecBySpec(t *testing.T) {
	work := t.TempDir()
	reg := suites[0]
	a := spec{suite: reg, text: "Integration DaemonSet should account for LimitRange Default", suiteText: "Regression"}
	b := spec{suite: reg, text: "Integration DaemonSet should account for LimitRange DefaultRequest", suiteText: "Regression"}
	c := spec{suite: reg, text: "Integration DaemonSet a spec added since", suiteText: "Regression"}
	all := plannedBatch{batch: batches[1], suite: reg, specs: []spec{a, b, c}}
	at := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	require.NoError(t, saveBatch(work, "abc1234", all, []result{
		{spec: a, state: passed, took: 10 * time.Second},
		{spec: b, state: failed, reason: "timed out", took: 6 * time.Minute, afterAll: "leaked a node"},
		{spec: c, state: failed, reason: notRunReason + "the suite's process ran none of its specs"},
	}, at))

	got, saved, err := loadBatch(work, all)
	require.NoError(t, err)
	require.Equal(t, at, saved)
	require.Equal(t, []result{
		{spec: a, state: passed, batch: "integration", took: 10 * time.Second, commit: "abc1234", kept: true},
		{spec: b, state: failed, reason: "timed out", batch: "integration", took: 6 * time.Minute, afterAll: "leaked a node", commit: "abc1234", kept: true},
	}, got, "c could not run: nothing saved for it")

	// b run again at another commit: its result is replaced, a's kept.
	require.NoError(t, saveBatch(work, "def5678", plannedBatch{batch: batches[1], suite: reg, specs: []spec{b}},
		[]result{{spec: b, state: passed, took: 20 * time.Second}}, at.Add(time.Hour)))
	got, _, err = loadBatch(work, all)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, result{spec: a, state: passed, batch: "integration", took: 10 * time.Second, commit: "abc1234", kept: true}, got[0])
	require.Equal(t, result{spec: b, state: passed, batch: "integration", took: 20 * time.Second, commit: "def5678", kept: true}, got[1])
	require.Equal(t, "measured at `abc1234` (batches integration); `def5678` (batches integration)", measuredAt("zzz", got),
		"the markdown names each commit")
	require.Equal(t, "`abc1234`", measuredAt("def5678", got[:1]))

	got, _, err = loadBatch(work, plannedBatch{batch: batches[0], suite: reg, specs: []spec{a}})
	require.NoError(t, err)
	require.Empty(t, got, "nothing saved for this batch")

	require.NoError(t, os.WriteFile(savedPath(work, "integration"), []byte("{not json"), 0o644))
	_, _, err = loadBatch(work, all)
	require.ErrorContains(t, err, "integration.json", "a damaged file is an error that names it, not a silent re-run")
}

// --report lists the specs without a saved result apart, counted in neither suite's line.
func TestNotRunSpecsAreCountedApart(t *testing.T) {
	reg := suites[0]
	results := []result{
		{spec: spec{suite: reg, text: "A"}, state: passed, batch: "validation"},
		{spec: spec{suite: reg, text: "B"}, state: notRun, batch: "nodeclaim"},
		{spec: spec{suite: reg, text: "C"}, state: notRun, batch: "performance"},
	}
	var sb strings.Builder
	printTable(&sb, results)
	require.Contains(t, sb.String(), "regression: 1 run, 1 passed, 0 failed, 0 skipped")
	require.Contains(t, sb.String(), "not run yet: 2 specs (batches nodeclaim, performance), in neither line above")
}

// Two reports of the same results are the same file, whatever order ginkgo listed the specs in
// (it shuffles them): results are by suite, then by name.
func TestResultsAreInOneOrder(t *testing.T) {
	reg, sched := suites[0], suites[len(suites)-1]
	x := result{spec: spec{suite: sched, text: "Scheduling a"}}
	y := result{spec: spec{suite: reg, text: "Drift b"}}
	z := result{spec: spec{suite: reg, text: "Chaos c"}}
	one, other := []result{x, y, z}, []result{z, x, y}
	sortResults(one)
	sortResults(other)
	require.Equal(t, one, other)
	require.Equal(t, []string{"Chaos c", "Drift b", "Scheduling a"}, []string{one[0].spec.text, one[1].spec.text, one[2].spec.text})
}
