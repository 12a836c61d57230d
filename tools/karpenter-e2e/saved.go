package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A full run takes hours, so each batch's results are saved in the work directory as its specs
// end (results/<batch>.json: each spec's result with the commit it was measured at), merged with
// what earlier runs saved for the batch's other specs. --resume keeps every saved result and runs
// only the specs without one: an interrupted run (a spec that hung the machine, a stack
// restarted, the end of a working day) goes on where it stopped, and the markdown still covers
// every spec, naming the commit each was measured at when they differ. --report writes the
// markdown from the saved results alone, listing the specs without one as not run yet. Without
// --resume every spec runs.

// savedBatch is one batch's results as saved.
type savedBatch struct {
	Commit  string        `json:"commit"`
	Batch   string        `json:"batch"`
	Saved   time.Time     `json:"saved"`
	Results []savedResult `json:"results"`
}

type savedResult struct {
	Text     string        `json:"text"`
	Commit   string        `json:"commit,omitempty"` // absent in files of the first format: the batch's
	State    string        `json:"state"`
	Reason   string        `json:"reason,omitempty"`
	Took     time.Duration `json:"took"`
	AfterAll string        `json:"afterAll,omitempty"`
}

func savedPath(work, batch string) string { return filepath.Join(work, "results", batch+".json") }

// saveBatch merges a batch's new results into what is saved for it (a spec run again replaces
// its old result) and writes the file atomically: a run killed while writing leaves the old
// file or none. Results that say a spec was not run are not saved.
func saveBatch(work, commit string, b plannedBatch, results []result, now time.Time) error {
	saved, _, err := loadSaved(work, b.name)
	if err != nil {
		return err
	}
	sb := savedBatch{Commit: commit, Batch: b.name, Saved: now.UTC()}
	fresh := map[string]bool{}
	for _, r := range results {
		if r.state == failed && strings.HasPrefix(r.reason, notRunReason) {
			continue
		}
		fresh[r.spec.text] = true
		sb.Results = append(sb.Results, savedResult{Text: r.spec.text, Commit: commit, State: r.state, Reason: r.reason, Took: r.took, AfterAll: r.afterAll})
	}
	for _, r := range saved {
		if !fresh[r.Text] {
			sb.Results = append(sb.Results, r)
		}
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

// loadSaved reads what is saved for a batch (nothing if no file).
func loadSaved(work, batch string) ([]savedResult, time.Time, error) {
	data, err := os.ReadFile(savedPath(work, batch))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	var sb savedBatch
	if err := json.Unmarshal(data, &sb); err != nil {
		return nil, time.Time{}, fmt.Errorf("reading %s: %w", savedPath(work, batch), err)
	}
	if sb.Batch != batch {
		return nil, time.Time{}, nil
	}
	for i := range sb.Results {
		if sb.Results[i].Commit == "" {
			sb.Results[i].Commit = sb.Commit
		}
	}
	return sb.Results, sb.Saved, nil
}

// loadBatch returns the saved results of the batch's specs that have one, in the batch's
// order, each with the commit it was measured at, and when the batch was last saved.
func loadBatch(work string, b plannedBatch) (results []result, saved time.Time, err error) {
	all, saved, err := loadSaved(work, b.name)
	if err != nil {
		return nil, time.Time{}, err
	}
	byText := map[string]savedResult{}
	for _, r := range all {
		byText[r.Text] = r
	}
	for _, sp := range b.specs {
		if r, found := byText[sp.text]; found {
			results = append(results, result{spec: sp, state: r.State, reason: r.Reason, batch: b.name, took: r.Took, afterAll: r.AfterAll,
				commit: r.Commit, kept: true})
		}
	}
	return results, saved, nil
}
