package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// A full run takes hours, so each batch's results are saved in the work directory as the batch
// ends (results/<batch>.json), with the commit they were measured at. --resume keeps the saved
// results of every batch whose specs all have one, and runs only the others: an interrupted run
// (a spec that hung the machine, a stack restarted, the end of a working day) goes on where it
// stopped, and the markdown still covers every spec. Results kept from another commit than the
// one running are not hidden: the markdown names the commit each batch was measured at. Without
// --resume every batch runs.

// savedBatch is one batch's results as saved.
type savedBatch struct {
	Commit  string        `json:"commit"`
	Batch   string        `json:"batch"`
	Saved   time.Time     `json:"saved"`
	Results []savedResult `json:"results"`
}

type savedResult struct {
	Text     string        `json:"text"`
	State    string        `json:"state"`
	Reason   string        `json:"reason,omitempty"`
	Took     time.Duration `json:"took"`
	AfterAll string        `json:"afterAll,omitempty"`
}

func savedPath(work, batch string) string { return filepath.Join(work, "results", batch+".json") }

// saveBatch writes a batch's results (atomically: a run killed while writing leaves the old
// file or none).
func saveBatch(work, commit string, b plannedBatch, results []result, now time.Time) error {
	sb := savedBatch{Commit: commit, Batch: b.name, Saved: now.UTC()}
	for _, r := range results {
		sb.Results = append(sb.Results, savedResult{Text: r.spec.text, State: r.state, Reason: r.reason, Took: r.took, AfterAll: r.afterAll})
	}
	data, err := json.MarshalIndent(sb, "", "  ")
	if err != nil {
		return err
	}
	path := savedPath(work, b.name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// loadBatch returns the saved results of a batch, one per spec of the batch in its order, each
// with the commit it was measured at; ok is false when there are none or a spec of the batch
// has none (the plan changed: the batch runs again).
func loadBatch(work string, b plannedBatch) (results []result, saved time.Time, ok bool, err error) {
	data, err := os.ReadFile(savedPath(work, b.name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, time.Time{}, false, nil
	}
	if err != nil {
		return nil, time.Time{}, false, err
	}
	var sb savedBatch
	if err := json.Unmarshal(data, &sb); err != nil {
		return nil, time.Time{}, false, fmt.Errorf("reading %s: %w", savedPath(work, b.name), err)
	}
	if sb.Batch != b.name {
		return nil, time.Time{}, false, nil
	}
	byText := map[string]savedResult{}
	for _, r := range sb.Results {
		byText[r.Text] = r
	}
	for _, sp := range b.specs {
		r, found := byText[sp.text]
		if !found {
			return nil, time.Time{}, false, nil
		}
		results = append(results, result{spec: sp, state: r.State, reason: r.Reason, batch: b.name, took: r.Took, afterAll: r.AfterAll,
			commit: sb.Commit, kept: true})
	}
	return results, sb.Saved, true, nil
}
