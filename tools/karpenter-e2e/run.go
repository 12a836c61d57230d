package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runner runs planned batches of one stack's suites and collects a result per spec.
type runner struct {
	bins string   // the built test binaries
	work string   // reports, logs, the node class and pool files
	env  []string // the suites' environment (KUBECONFIG, CLUSTER_*, the AWS endpoints)
	out  io.Writer
	// nodeClass, nodePool: the files the core suite takes as --default-nodeclass/-nodepool.
	nodeClass, nodePool string
	// prepare readies the stack for a suite (the settings shim's MIN_VALUES_POLICY).
	prepare func(context.Context, suite) error
	// clean removes what a batch left (the suites' own clean-up may have been interrupted)
	// and waits until no node of a test pool remains.
	clean func(context.Context) error
}

// result is one spec's outcome: passed, failed or skipped, and why (a skip's reason, a
// failure's first line).
type result struct {
	spec   spec
	state  string
	reason string
	batch  string
	took   time.Duration
	// afterAll is the failure of the spec's Ordered container's AfterAll, which ran after it
	// and which ginkgo charges to it; the spec itself passed.
	afterAll string
	commit   string // the Fleetwright commit it was measured at (a result kept by --resume: an earlier one)
	kept     bool   // kept by --resume from an earlier run
}

const (
	passed  = "passed"
	failed  = "failed"
	skipped = "skipped"
	// notRun is a spec --report found no saved result for: neither run nor counted.
	notRun = "not run yet"
)

// notRunReason starts the reason of a spec a batch could not run (counted failed, never saved).
const notRunReason = "not run: "

// ginkgo's JSON report, the parts read here.
type ginkgoReport struct {
	SuiteDescription string
	SpecReports      []ginkgoSpec
}

type ginkgoSpec struct {
	ContainerHierarchyTexts []string
	LeafNodeText            string
	LeafNodeType            string
	State                   string
	RunTime                 time.Duration
	Failure                 *struct {
		Message         string
		FailureNodeType string
		Location        struct {
			FileName   string
			LineNumber int
		}
	}
}

func (g ginkgoSpec) text() string {
	return strings.Join(append(append([]string{}, g.ContainerHierarchyTexts...), g.LeafNodeText), " ")
}

// listSpecs asks a suite's binary for its specs (a ginkgo dry run: nothing touches the cluster).
func (r *runner) listSpecs(ctx context.Context, s suite) ([]spec, error) {
	report := filepath.Join(r.work, strings.TrimSuffix(s.binary(), ".test")+"-specs.json")
	cmd := exec.CommandContext(ctx, filepath.Join(r.bins, s.binary()), "-ginkgo.dry-run", "-ginkgo.no-color", "-ginkgo.json-report="+report)
	cmd.Dir = r.work
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("listing the specs of %s: %w\n%s", s.binary(), err, b)
	}
	rep, err := readReport(report)
	if err != nil {
		return nil, err
	}
	var specs []spec
	for _, g := range rep.SpecReports {
		if g.LeafNodeType == "It" {
			specs = append(specs, spec{suite: s, text: g.text(), suiteText: rep.SuiteDescription})
		}
	}
	return specs, nil
}

func readReport(path string) (ginkgoReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return ginkgoReport{}, fmt.Errorf("reading ginkgo's report: %w", err)
	}
	var reps []ginkgoReport
	if err := json.Unmarshal(b, &reps); err != nil {
		return ginkgoReport{}, fmt.Errorf("reading ginkgo's report %s: %w", path, err)
	}
	if len(reps) != 1 {
		return ginkgoReport{}, fmt.Errorf("%s holds %d suite reports, want 1", path, len(reps))
	}
	return reps[0], nil
}

// runBatch runs a batch's specs until each has a result. A process that ends before every spec
// ran (a spec interrupted for running past the batch's spec timeout) leaves the rest to the
// next process, after a clean-up.
func (r *runner) runBatch(ctx context.Context, b plannedBatch) []result {
	results := map[string]result{}
	remaining := b.specs
	fmt.Fprintf(r.out, "karpenter-e2e: batch %s: %d specs of %s, at most %s each\n", b.name, len(b.specs), b.suite.binary(), b.specTimeout)
	start := time.Now()
	for process := 1; len(remaining) > 0; process++ {
		if err := r.prepare(ctx, b.suite); err != nil {
			for _, sp := range remaining {
				results[sp.text] = result{spec: sp, state: failed, reason: notRunReason + "preparing the stack: " + err.Error()}
			}
			break
		}
		got, err := r.invoke(ctx, b, remaining, process, len(b.specs)-len(remaining))
		for text, res := range got {
			results[text] = res
		}
		var next []spec
		for _, sp := range remaining {
			if _, ok := results[sp.text]; !ok {
				next = append(next, sp)
			}
		}
		if cerr := r.clean(ctx); cerr != nil {
			fmt.Fprintf(r.out, "karpenter-e2e: batch %s: cleaning up: %v\n", b.name, cerr)
		}
		if len(next) == len(remaining) || ctx.Err() != nil {
			// Nothing ran: the process failed before its specs (BeforeSuite, a crash).
			why := "the suite's process ran none of its specs"
			if err != nil {
				why += ": " + err.Error()
			}
			for _, sp := range next {
				results[sp.text] = result{spec: sp, state: failed, reason: notRunReason + why}
			}
			break
		}
		remaining = next
	}
	out := make([]result, 0, len(b.specs))
	counts := map[string]int{}
	for _, sp := range b.specs {
		res := results[sp.text]
		res.spec, res.batch = sp, b.name
		counts[res.state]++
		out = append(out, res)
	}
	fmt.Fprintf(r.out, "karpenter-e2e: batch %s done in %s: %d passed, %d failed\n", b.name, time.Since(start).Round(time.Second), counts[passed], counts[failed])
	return out
}

// specStart is the line ginkgo's verbose reporter prints after a separator when a spec starts
// (its text; the suite's own nodes print as "[BeforeSuite]" and the like); specEnd is the line
// that closes it.
var (
	separator = "------------------------------"
	specEnd   = regexp.MustCompile(`^[•SP] (\[([A-Z]+)\] )?\[[0-9.]+ seconds\]`)
)

// invoke runs one process of a batch's test binary on the given specs and returns the results
// its report holds. It interrupts a spec that runs past the batch's spec timeout (ginkgo then
// runs the spec's clean-up and skips the rest) and kills a process that does not stop after.
func (r *runner) invoke(ctx context.Context, b plannedBatch, specs []spec, process, done int) (map[string]result, error) {
	base := fmt.Sprintf("%s-%d", b.name, process)
	report := filepath.Join(r.work, base+".json")
	_ = os.Remove(report)
	logPath := filepath.Join(r.work, base+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	budget := b.specTimeout*time.Duration(len(specs)) + 5*time.Minute
	args := []string{
		"-test.timeout=" + (budget + 10*time.Minute).String(),
		"-ginkgo.v", "-ginkgo.no-color",
		"-ginkgo.focus=" + focusOf(specs),
		"-ginkgo.json-report=" + report,
		"-ginkgo.timeout=" + budget.String(),
		"-ginkgo.grace-period=2m",
	}
	if b.suite.nodeFlags {
		args = append(args, "--default-nodeclass="+r.nodeClass, "--default-nodepool="+r.nodePool)
	}
	cmd := exec.Command(filepath.Join(r.bins, b.suite.binary()), args...)
	cmd.Dir = r.work
	cmd.Env = r.env
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", b.suite.binary(), err)
	}
	fmt.Fprintf(r.out, "karpenter-e2e: batch %s: process %d (%d specs), log %s\n", b.name, process, len(specs), logPath)

	var mu sync.Mutex
	var current string
	var since time.Time
	interrupted := ""
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
		afterSeparator := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, line)
			switch {
			case line == separator:
				afterSeparator = true
				continue
			case afterSeparator && line != "" && !strings.HasPrefix(line, "[") && strings.Trim(line, "SP") != "":
				done++
				mu.Lock()
				current, since = line, time.Now()
				mu.Unlock()
				fmt.Fprintf(r.out, "karpenter-e2e: [%s %d/%d] %s%s\n", b.name, done, len(b.specs), b.suite.prefix, line)
			case specEnd.MatchString(line):
				mu.Lock()
				if current != "" {
					state := "passed"
					if m := specEnd.FindStringSubmatch(line); m[2] != "" {
						state = strings.ToLower(m[2])
					}
					fmt.Fprintf(r.out, "karpenter-e2e:     %s (%s)\n", state, time.Since(since).Round(time.Second))
				}
				current = ""
				mu.Unlock()
			}
			afterSeparator = false
		}
	}()

	exited := make(chan error, 1)
	go func() {
		<-scanned
		exited <- cmd.Wait()
	}()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	var killAt time.Time
	var waitErr error
wait:
	for {
		select {
		case waitErr = <-exited:
			break wait
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGINT)
			if killAt.IsZero() {
				killAt = time.Now().Add(30 * time.Second)
			}
		case <-tick.C:
			mu.Lock()
			if current != "" && interrupted == "" && time.Since(since) > b.specTimeout {
				interrupted = current
				fmt.Fprintf(r.out, "karpenter-e2e:     running past %s: interrupted\n", b.specTimeout)
				_ = cmd.Process.Signal(syscall.SIGINT)
				killAt = time.Now().Add(3 * time.Minute) // ginkgo's grace period for clean-up, and some
			}
			mu.Unlock()
			if !killAt.IsZero() && time.Now().After(killAt) {
				_ = cmd.Process.Kill()
			}
		}
	}

	results := map[string]result{}
	rep, rerr := readReport(report)
	if rerr != nil {
		return results, fmt.Errorf("%s ended (%v) without a report: %w; see %s", b.suite.binary(), waitErr, rerr, logPath)
	}
	for _, g := range rep.SpecReports {
		if g.LeafNodeType != "It" {
			continue
		}
		res := result{state: failed, took: g.RunTime}
		switch g.State {
		case "passed":
			res.state = passed
		case "skipped", "pending":
			if g.Failure == nil || g.RunTime == 0 {
				continue // not run (after an interruption): the next process runs it
			}
			res.state, res.reason = skipped, "the suite skipped it: "+oneLine(g.Failure.Message)
		case "interrupted":
			if interrupted == "" {
				continue // interrupted from outside: not a result
			}
			res.reason = fmt.Sprintf("timed out: still running after %s (interrupted; ginkgo: %s)", b.specTimeout, failureText(g))
		default: // failed, panicked, timedout, aborted
			if g.Failure != nil && g.Failure.FailureNodeType == "AfterAll" {
				res.state, res.afterAll = passed, failureText(g)
				break
			}
			res.reason = failureText(g)
		}
		results[g.text()] = res
	}
	return results, nil
}

// failureText is a failure's message, where it failed, and in which node when not the spec
// itself (an AfterEach clean-up, an AfterAll check of an Ordered container).
func failureText(g ginkgoSpec) string {
	if g.Failure == nil {
		return g.State
	}
	f := g.Failure
	s := oneLine(f.Message)
	if loc := f.Location; loc.FileName != "" {
		s += fmt.Sprintf(" (%s:%d)", filepath.Base(loc.FileName), loc.LineNumber)
	}
	if f.FailureNodeType != "" && f.FailureNodeType != "It" {
		s = "in " + f.FailureNodeType + ": " + s
	}
	return s
}

// oneLine is a message on one line, cut at 300 characters (ginkgo's messages run over several:
// "Timed out after 900s." and then what was expected).
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}
