package main

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A batch's saved results come back for --resume, with the commit they were measured at, only
// when they cover every spec the batch plans now.
func TestSavedBatchesResumeOnlyWhatTheyCover(t *testing.T) {
	work := t.TempDir()
	reg := suites[0]
	a := spec{suite: reg, text: "Integration DaemonSet should account for LimitRange Default", suiteText: "Regression"}
	b := spec{suite: reg, text: "Integration DaemonSet should account for LimitRange DefaultRequest", suiteText: "Regression"}
	pb := plannedBatch{batch: batches[1], suite: reg, specs: []spec{a, b}}
	at := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	require.NoError(t, saveBatch(work, "abc1234", pb, []result{
		{spec: a, state: passed, took: 10 * time.Second},
		{spec: b, state: failed, reason: "timed out", took: 6 * time.Minute, afterAll: "leaked a node"},
	}, at))

	got, saved, ok, err := loadBatch(work, pb)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, at, saved)
	require.Equal(t, []result{
		{spec: a, state: passed, batch: "integration", took: 10 * time.Second, commit: "abc1234", kept: true},
		{spec: b, state: failed, reason: "timed out", batch: "integration", took: 6 * time.Minute, afterAll: "leaked a node", commit: "abc1234", kept: true},
	}, got)
	require.Equal(t, "measured at `abc1234` (batches integration); `def5678` (batches validation)",
		measuredAt("def5678", append(got, result{spec: b, state: passed, batch: "validation", commit: "def5678"})),
		"the markdown names the commit of each batch kept")
	require.Equal(t, "`abc1234`", measuredAt("def5678", got))

	c := spec{suite: reg, text: "Integration DaemonSet a spec added since", suiteText: "Regression"}
	_, _, ok, err = loadBatch(work, plannedBatch{batch: batches[1], suite: reg, specs: []spec{a, b, c}})
	require.NoError(t, err)
	require.False(t, ok, "a batch with a spec that has no saved result runs again")

	_, _, ok, err = loadBatch(work, plannedBatch{batch: batches[0], suite: reg, specs: []spec{a}})
	require.NoError(t, err)
	require.False(t, ok, "nothing saved for this batch")

	require.NoError(t, os.WriteFile(savedPath(work, "integration"), []byte("{not json"), 0o644))
	_, _, _, err = loadBatch(work, pb)
	require.ErrorContains(t, err, "integration.json", "a damaged file is an error that names it, not a silent re-run")
}
