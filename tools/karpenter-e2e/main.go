// Command karpenter-e2e runs Karpenter's own end-to-end suites — the core's regression suite
// (sigs.k8s.io/karpenter, test/suites/regression) and the AWS provider's scheduling suite
// (github.com/aws/karpenter-provider-aws, test/suites/scheduling-{strict,besteffort}) — unmodified,
// against `make up`'s stack, and prints a table: each spec passed, failed or skipped, and why.
//
//	make up && make karpenter-e2e                  # everything; writes docs/karpenter-e2e.md
//	go run ./tools/karpenter-e2e --batch validation,strict
//	go run ./tools/karpenter-e2e --focus 'Drift.*budgets'
//	make karpenter-e2e KARPENTER_E2E_ARGS='--resume --out docs/karpenter-e2e.md'   # after an interruption
//
// The suites are pinned in tools/karpenter-e2e/suites (a module outside go.work: their
// Kubernetes libraries are newer than Fleetwright's) and built from it with `go test -c` into
// ~/.cache/fleetwright/karpenter-e2e. The specs run in batches (plan.go), each spec bounded by
// its batch's spec timeout; the skip list (plan.go) says why each spec not run is not.
//
// Flow:
//
//	build (go test -c) ─▶ shims (CRDs, settings Deployment, node class/pool files)
//	  ─▶ list specs (ginkgo dry run) ─▶ plan (skip or batch, each spec)
//	  ─▶ per batch: process ─▶ report ─▶ clean ─▶ next process for specs not run yet
//	  ─▶ table, summary lines, --out markdown
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/proc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "karpenter-e2e:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := proc.RepoRoot()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("karpenter-e2e", flag.ContinueOnError)
	envFile := fs.String("env", filepath.Join(root, ".local", "env"), "the env file `make up` writes")
	focus := fs.String("focus", "", "run only the specs whose name matches this regular expression")
	only := fs.String("batch", "", "run only these batches (comma separated: "+batchNames()+")")
	out := fs.String("out", "", "write the result as markdown to this file (docs/karpenter-e2e.md)")
	work := fs.String("work", filepath.Join(root, ".local", "karpenter-e2e"), "directory for the suites' reports and logs")
	resume := fs.Bool("resume", false, "keep the results earlier runs saved (--work's results/; the markdown names the commit each was measured at), and run only the specs without one")
	report := fs.Bool("report", false, "run nothing: print (and with --out write) the saved results, the specs without one listed as not run yet")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	keep, err := selection(*focus, *only)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	env, err := e2e.ReadStackEnv(*envFile)
	if err != nil {
		return fmt.Errorf("%w (is `make up`'s stack running?)", err)
	}
	t, err := targetOf(env["KUBECONFIG"], env["AWS_ENDPOINT_URL_EC2"], "demo-cluster")
	if err != nil {
		return err
	}
	start := time.Now()
	commit := commitOf(root)
	results, err := runSuites(ctx, root, t, options{keep: keep, work: *work, out: os.Stdout, commit: commit, resume: *resume, reportOnly: *report})
	if err != nil {
		return err
	}
	printTable(os.Stdout, results)
	if ctx.Err() != nil {
		return errors.New("interrupted: the specs not run are reported failed")
	}
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		writeMarkdown(f, runInfo{commit: commit, started: start, took: time.Since(start),
			versions: pinnedVersions(root), stack: "`make up`'s stack (kwok nodes, the AWS emulator)", reportOnly: *report}, results)
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Printf("karpenter-e2e: wrote %s\n", *out)
	}
	return nil
}

func batchNames() string {
	var names []string
	for _, b := range batches {
		names = append(names, b.name)
	}
	return strings.Join(names, ", ")
}

// selection is the specs --focus and --batch leave (nil: all).
func selection(focus, only string) (func(spec) bool, error) {
	if focus == "" && only == "" {
		return nil, nil
	}
	re, err := regexp.Compile(focus)
	if err != nil {
		return nil, fmt.Errorf("--focus: %w", err)
	}
	var names []string
	if only != "" {
		names = strings.Split(only, ",")
		for _, n := range names {
			if !slices.ContainsFunc(batches, func(b batch) bool { return b.name == n }) {
				return nil, fmt.Errorf("--batch: no batch %q (there are: %s)", n, batchNames())
			}
		}
	}
	return func(sp spec) bool {
		if !re.MatchString(sp.name()) {
			return false
		}
		if names == nil {
			return true
		}
		if _, ok := skipOf(sp); ok {
			return false
		}
		b, ok := batchOf(sp)
		return ok && slices.Contains(names, b.name)
	}, nil
}

// targetOf is the stack at this kubeconfig and emulator.
func targetOf(kubeconfig, awsURL, clusterName string) (target, error) {
	if kubeconfig == "" || awsURL == "" {
		return target{}, errors.New("the env file names no KUBECONFIG or AWS_ENDPOINT_URL_EC2")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return target{}, fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	kube, err := e2e.NewClient(rc)
	if err != nil {
		return target{}, err
	}
	return target{kubeconfig: kubeconfig, server: rc.Host, awsURL: awsURL, clusterName: clusterName, kube: kube}, nil
}

// options of one run of the suites.
type options struct {
	keep       func(spec) bool // the specs to plan (nil: all)
	work       string
	out        io.Writer
	commit     string // what the results are measured at, saved with each spec's
	resume     bool   // keep the saved results and run only the specs without one
	reportOnly bool   // run nothing: report the saved results, the specs without one as not run
}

// runSuites builds the suites, installs the shims, plans and runs the specs, and returns a
// result per planned spec in the suites' order.
func runSuites(ctx context.Context, root string, t target, o options) ([]result, error) {
	if err := os.MkdirAll(o.work, 0o755); err != nil {
		return nil, err
	}
	bins, err := buildSuites(ctx, root, o.out)
	if err != nil {
		return nil, err
	}
	mods, err := moduleDirs(ctx, root)
	if err != nil {
		return nil, err
	}
	var nodeClass, nodePool string
	if !o.reportOnly {
		if nodeClass, nodePool, err = installShims(ctx, t, mods, o.work); err != nil {
			return nil, err
		}
	}
	r := &runner{bins: bins, work: o.work, env: t.suiteEnv(), out: o.out, nodeClass: nodeClass, nodePool: nodePool,
		prepare: func(ctx context.Context, s suite) error { return applySettings(ctx, t, s.policy) },
		clean:   func(ctx context.Context) error { return clean(ctx, t.kube) },
	}
	var specs []spec
	for _, s := range suites {
		got, err := r.listSpecs(ctx, s)
		if err != nil {
			return nil, err
		}
		specs = append(specs, got...)
	}
	p, err := makePlan(specs, o.keep)
	if err != nil {
		return nil, err
	}
	if o.reportOnly {
		// nothing runs: the cluster is left as it is
	} else if err := r.clean(ctx); err != nil { // what an earlier run may have left
		return nil, fmt.Errorf("the cluster is not clean: %w", err)
	}
	byText := map[spec]result{}
	for sp, sk := range p.skipped {
		byText[sp] = result{spec: sp, state: skipped, reason: sk.text()}
	}
	for _, b := range p.batches {
		todo := b
		if o.resume || o.reportOnly {
			kept, at, err := loadBatch(o.work, b)
			if err != nil {
				return nil, err
			}
			done := map[string]bool{}
			for _, res := range kept {
				byText[res.spec] = res
				done[res.spec.text] = true
			}
			todo.specs = slices.DeleteFunc(slices.Clone(b.specs), func(sp spec) bool { return done[sp.text] })
			if len(kept) > 0 {
				fmt.Fprintf(o.out, "karpenter-e2e: batch %s: %d of %d results kept from earlier runs (last saved %s)\n", b.name, len(kept), len(b.specs), at.Format(time.RFC3339))
			}
		}
		if len(todo.specs) == 0 {
			continue
		}
		if o.reportOnly {
			for _, sp := range todo.specs {
				byText[sp] = result{spec: sp, state: notRun, batch: b.name, reason: "no saved result: run `make karpenter-e2e` with --resume"}
			}
			continue
		}
		got := r.runBatch(ctx, todo)
		for i := range got {
			got[i].commit = o.commit
			byText[got[i].spec] = got[i]
		}
		// Saved even when interrupted: what ended is a result; what did not is not saved.
		if err := saveBatch(o.work, o.commit, todo, got, time.Now()); err != nil {
			fmt.Fprintf(o.out, "karpenter-e2e: batch %s: saving its results: %v\n", b.name, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	var results []result
	for _, sp := range specs {
		if res, ok := byText[sp]; ok {
			results = append(results, res)
		}
	}
	sortResults(results)
	return results, nil
}

func commitOf(root string) string {
	b, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// pinnedVersions are the two Karpenter modules' versions in the pinned module.
func pinnedVersions(root string) string {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}}@{{.Version}}", coreModule, awsModule)
	cmd.Dir = filepath.Join(root, pinDir)
	cmd.Env = goEnv()
	b, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return "`" + strings.Join(strings.Fields(string(b)), "`, `") + "`"
}

// sortResults orders results by suite, then by name: ginkgo lists a suite's specs in a random
// order, and two reports of the same results must be the same file.
func sortResults(results []result) {
	slices.SortStableFunc(results, func(a, b result) int {
		if c := strings.Compare(a.spec.suite.name, b.spec.suite.name); c != 0 {
			return c
		}
		return strings.Compare(a.spec.name(), b.spec.name())
	})
}
