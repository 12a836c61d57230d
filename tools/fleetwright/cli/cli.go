// Package cli is Fleetwright's operator CLI. It answers "why is this node here (or gone)?",
// "why is this pod pending?" and "what would this workload get?" from the audit history on NATS,
// the Kubernetes objects and the scheduler, taps and replays the bus, and checks a cluster
// before Fleetwright is installed. One code, two binaries: fleetwright (tools/fleetwright) and
// the kubectl plugin kubectl-fleetwright (tools/kubectl-fleetwright), which kubectl runs for
// `kubectl fleetwright ...`.
//
//	why node|nodeclaim NAME   pool, pods, batch, instance types, price, lifecycle, removal or what blocks it
//	why pod NAMESPACE/NAME    its batches, the per-NodePool explanation, its NodeClaim
//	simulate -f workload.yaml which pool, instance types and $/h it would get now (creates nothing)
//	tap [--since 1h] [--stream] every message as one JSON line, live or replayed
//	deadletters ls|replay     dead letters, and sending them back where they came from
//	preflight                 can Fleetwright's CRDs be applied here (stored versions, webhooks)?
//	version, completion SHELL
//
// Connection settings come from flags, then the environment (KUBECONFIG, NATS_URL, NATS_USER,
// NATS_PASSWORD, ...), then the local stack's .local/env (written by `make up`). Output is for
// people; -o json is for scripts.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/fleetwright/fleetwright/pkg/service"
)

// prog is how the user called the CLI, for its usage and messages: "fleetwright", or
// "kubectl fleetwright" for the plugin.
var prog = "fleetwright"

// Main runs the CLI as name ("fleetwright", "kubectl fleetwright") on the process's arguments and
// exits with its code: 0 done, 1 failed, 2 bad usage. Interrupt and SIGTERM end it.
func Main(name string) {
	prog = name
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError is a mistake in how the command was called: exit code 2, with the usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// usage is the CLI's help: its commands, one line each.
func usage() string {
	return `usage: ` + prog + ` COMMAND [flags]

commands:
  why node NAME               why this node exists, or went: pool, pods, batch, instance types
  why nodeclaim NAME          considered and chosen, price, launch/registration/initialization,
                              removal reason with its numbers, evictions, or what blocks removal
  why pod NAMESPACE/NAME      its batches, why no NodePool took it (per pool), its NodeClaim
  simulate -f FILE            what the workload in FILE (Pods, Deployments, ...) would get now
  tap [--since D] [--stream]  every message as JSON; --since replays the stored history first
  deadletters ls              stored dead letters with their error
  deadletters replay [SEQ...] publish dead letters again on their original subject (stored
                              within --max-age, 1h, unless --force)
  preflight                   whether Fleetwright's CRDs can be applied to this cluster, and what
                              to do first if not (stored versions, conversion webhooks)
  version                     this CLI's version
  completion bash|zsh|fish|kubectl
                              shell completion (kubectl: the kubectl_complete-fleetwright helper)

Run '` + prog + ` COMMAND -h' for a command's flags.
`
}

func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdout, stderr)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %s\n\n%s", prog, ue.msg, usage())
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("no command given")
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "why":
		if len(rest) == 0 {
			return usagef("why what? node, nodeclaim or pod")
		}
		switch rest[0] {
		case "node", "nodeclaim":
			return whyNodeCmd(ctx, rest[0], rest[1:], stdout, stderr)
		case "pod":
			return whyPodCmd(ctx, rest[1:], stdout, stderr)
		default:
			return usagef("why %s: want node, nodeclaim or pod", rest[0])
		}
	case "simulate":
		return simulateCmd(ctx, rest, stdout, stderr)
	case "tap":
		return tapCmd(ctx, rest, stdout, stderr)
	case "deadletters":
		if len(rest) == 0 {
			return usagef("deadletters what? ls or replay")
		}
		switch rest[0] {
		case "ls":
			return deadLettersLsCmd(ctx, rest[1:], stdout, stderr)
		case "replay":
			return deadLettersReplayCmd(ctx, rest[1:], stdout, stderr)
		default:
			return usagef("deadletters %s: want ls or replay", rest[0])
		}
	case "preflight":
		return preflightCmd(ctx, rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "%s %s\n", prog, service.VersionString())
		return nil
	case "completion":
		return completionCmd(rest, stdout)
	case completeCmd:
		return complete(rest, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage())
		return nil
	default:
		return usagef("unknown command %q", cmd)
	}
}
