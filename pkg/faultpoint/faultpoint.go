// Package faultpoint lets the end-to-end fault tests (tools/e2e/fault) kill a service at an
// exact step of its work, as `kill -9` would: Reach(name) at a named step ends the process with
// SIGKILL at once — no deferred function, no shutdown hook, no flush — when the environment
// variable FLEETWRIGHT_FAULTPOINTS (comma-separated names) lists that name. It exists only for
// those tests; unset (always, in production) Reach is one load and one compare.
//
// Before dying Reach writes one line to stderr (the service's log), so a test can tell that the
// process died at the step it armed and not of something else:
//
//	{"level":"warn","faultpoint":"<name>","message":"fault point reached: killing this process with SIGKILL"}
//
// The named steps (each service's Reach calls name one of these):
//
//	scheduler.claim-created        a NodeClaim of a batch is created (with its pods' nominations),
//	                               not yet remembered by the replica; others of the batch may not be
//	scheduler.mid-nomination       one claim's nominations are recorded and remembered (other claims
//	                               of the batch, or pods placed on existing claims, may not be)
//	scheduler.before-publish       a batch's NodeClaims are created and their pods nominated,
//	                               its LaunchIntents not yet published
//	launcher.after-create-fleet    CreateFleet returned an instance, nothing else done yet
//	launcher.before-record         the instance is known (launched or adopted), not yet recorded
//	                               on the NodeClaim
//	launcher.mid-adoption          a Karpenter v0.2x node's adoption is half done: its NodeClaim
//	                               is made, its instance not yet tagged with it
//	terminator.after-taint         the node was just tainted karpenter.sh/disrupted (its NodeClaim
//	                               not yet deleted)
//	terminator.mid-drain           one pod of the node was just evicted, the drain not finished
//	terminator.after-terminate     TerminateInstances returned, the Node's and NodeClaim's
//	                               finalizers not yet released
package faultpoint

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Env is the environment variable that arms fault points.
const Env = "FLEETWRIGHT_FAULTPOINTS"

// The named steps (see the package doc).
const (
	SchedulerClaimCreated    = "scheduler.claim-created"
	SchedulerMidNomination   = "scheduler.mid-nomination"
	SchedulerBeforePublish   = "scheduler.before-publish"
	LauncherAfterCreateFleet = "launcher.after-create-fleet"
	LauncherBeforeRecord     = "launcher.before-record"
	LauncherMidAdoption      = "launcher.mid-adoption"
	TerminatorAfterTaint     = "terminator.after-taint"
	TerminatorMidDrain       = "terminator.mid-drain"
	TerminatorAfterTerminate = "terminator.after-terminate"
)

// Names are all the named steps.
var Names = []string{SchedulerClaimCreated, SchedulerMidNomination, SchedulerBeforePublish, LauncherAfterCreateFleet,
	LauncherBeforeRecord, LauncherMidAdoption, TerminatorAfterTaint, TerminatorMidDrain, TerminatorAfterTerminate}

// armed is read once, at start; nil (the rule) makes Reach a no-op.
var armed = parse(os.Getenv(Env))

func parse(v string) map[string]bool {
	var m map[string]bool
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if m == nil {
				m = map[string]bool{}
			}
			m[n] = true
		}
	}
	return m
}

// Armed reports whether the named step is armed in this process.
func Armed(name string) bool { return armed != nil && armed[name] }

// Reach kills this process with SIGKILL, at once, if the named step is armed; else it does
// nothing.
func Reach(name string) {
	if armed == nil || !armed[name] {
		return
	}
	fmt.Fprintf(os.Stderr, "{\"level\":\"warn\",\"faultpoint\":%q,\"message\":%q}\n", name, LogLine)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way; nothing after this step may run
}

// LogLine is the message of the line Reach writes before it kills the process.
const LogLine = "fault point reached: killing this process with SIGKILL"
