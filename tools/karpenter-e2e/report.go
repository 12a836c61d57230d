package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// summary counts one suite's results: R run (passed and failed), P passed, F failed, S skipped.
type summary struct {
	name                   string
	run, pass, fail, skips int
}

// Line is the form scripts read from docs/karpenter-e2e.md.
func (s summary) Line() string {
	return fmt.Sprintf("%s: %d run, %d passed, %d failed, %d skipped", s.name, s.run, s.pass, s.fail, s.skips)
}

// summarize counts the results per suite name, in the order of suites.
func summarize(results []result) []summary {
	var out []summary
	index := map[string]int{}
	for _, s := range suites {
		if _, ok := index[s.name]; !ok {
			index[s.name] = len(out)
			out = append(out, summary{name: s.name})
		}
	}
	for _, r := range results {
		s := &out[index[r.spec.suite.name]]
		switch r.state {
		case passed:
			s.run++
			s.pass++
		case failed:
			s.run++
			s.fail++
		case skipped:
			s.skips++
		}
	}
	return out
}

// printTable writes every spec with its result and, for skips and failures, why.
func printTable(w io.Writer, results []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SUITE\tSPEC\tRESULT\tWHY")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.spec.suite.name, r.spec.name(), r.state, r.reason)
	}
	_ = tw.Flush()
	writeAfterAlls(w, results)
	for _, s := range summarize(results) {
		fmt.Fprintln(w, s.Line())
	}
	if line := notRunLine(results); line != "" {
		fmt.Fprintln(w, line)
	}
}

// notRunLine counts the specs --report found no result for, with their batches ("" if none).
func notRunLine(results []result) string {
	n := 0
	var batches []string
	for _, r := range results {
		if r.state != notRun {
			continue
		}
		n++
		if len(batches) == 0 || batches[len(batches)-1] != r.batch {
			batches = append(batches, r.batch)
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("not run yet: %d specs (batches %s), in neither line above", n, strings.Join(batches, ", "))
}

// runInfo says what ran where, for the report's head.
type runInfo struct {
	commit   string
	started  time.Time
	took     time.Duration
	versions string // the pinned modules
	stack    string
	// reportOnly: written by --report from saved results, nothing run
	reportOnly bool
}

// writeMarkdown is docs/karpenter-e2e.md: how the run was made, the summary lines, and the
// table per suite.
func writeMarkdown(w io.Writer, info runInfo, results []result) {
	fmt.Fprintf(w, "# Karpenter's end-to-end suites against Fleetwright\n\n")
	fmt.Fprintf(w, "The last full run of `make karpenter-e2e` (`tools/karpenter-e2e`; how it works, the shims and\n")
	fmt.Fprintf(w, "the skip list: docs/development.md, \"Karpenter's end-to-end suites\"). Written by the tool with `--out`.\n\n")
	fmt.Fprintf(w, "- suites: %s\n", info.versions)
	fmt.Fprintf(w, "- Fleetwright: %s, on %s\n", measuredAt(info.commit, results), info.stack)
	if info.reportOnly {
		fmt.Fprintf(w, "- written %s with --report from the results earlier runs saved (each spec's time is its own)\n\n", info.started.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "- started %s, took %s%s\n\n", info.started.UTC().Format(time.RFC3339), info.took.Round(time.Minute), keptNote(results))
	}
	fmt.Fprintf(w, "```\n")
	for _, s := range summarize(results) {
		fmt.Fprintln(w, s.Line())
	}
	if line := notRunLine(results); line != "" {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "```\n")
	for _, s := range summarize(results) {
		fmt.Fprintf(w, "\n## %s\n\n| spec | result | why |\n|---|---|---|\n", s.name)
		for _, r := range results {
			if r.spec.suite.name != s.name {
				continue
			}
			took := ""
			if r.state != skipped && r.took > 0 {
				took = fmt.Sprintf(" (%s)", r.took.Round(time.Second))
			}
			fmt.Fprintf(w, "| %s | %s%s | %s |\n", cell(r.spec.name()), r.state, took, cell(r.reason))
		}
	}
	writeAfterAlls(w, results)
}

// measuredAt names the commit the results were measured at, or, when --resume kept batches of
// earlier commits, each commit with its batches.
func measuredAt(running string, results []result) string {
	batchesOf := map[string][]string{}
	var commits []string
	for _, r := range results {
		if r.state == skipped || r.commit == "" {
			continue
		}
		if _, ok := batchesOf[r.commit]; !ok {
			commits = append(commits, r.commit)
		}
		if !slices.Contains(batchesOf[r.commit], r.batch) {
			batchesOf[r.commit] = append(batchesOf[r.commit], r.batch)
		}
	}
	if len(commits) <= 1 {
		if len(commits) == 1 {
			running = commits[0]
		}
		return "`" + running + "`"
	}
	parts := make([]string, len(commits))
	for i, c := range commits {
		parts[i] = fmt.Sprintf("`%s` (batches %s)", c, strings.Join(batchesOf[c], ", "))
	}
	return "measured at " + strings.Join(parts, "; ")
}

// keptNote says how many batches' results --resume kept from earlier runs (their time is not in
// this run's).
func keptNote(results []result) string {
	kept, all := map[string]bool{}, map[string]bool{}
	for _, r := range results {
		if r.state == skipped {
			continue
		}
		all[r.batch] = true
		if r.kept {
			kept[r.batch] = true
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return fmt.Sprintf(" (this invocation; the results of %d of the %d batches were kept from earlier runs with --resume)", len(kept), len(all))
}

// writeAfterAlls lists the Ordered containers' AfterAll failures ginkgo charged to a spec that
// had passed: they check the suite, not one spec (the provider's scheduling suite checks that
// its specs used every well-known label, which needs every label spec, skipped ones too).
func writeAfterAlls(w io.Writer, results []result) {
	first := true
	for _, r := range results {
		if r.afterAll == "" {
			continue
		}
		if first {
			fmt.Fprintf(w, "\n## AfterAll checks\n\nRun after the last spec of each process of an Ordered container, and charged by ginkgo to\nthat spec, which had passed (counted passed above):\n\n")
			first = false
		}
		fmt.Fprintf(w, "- after %s: %s\n", cell(r.spec.name()), cell(r.afterAll))
	}
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
