package faultpoint

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	if parse("") != nil || parse(" , ") != nil {
		t.Fatal("nothing armed parses to nil")
	}
	m := parse("a, b,,c ")
	if len(m) != 3 || !m["a"] || !m["b"] || !m["c"] {
		t.Fatalf("parse: %v", m)
	}
}

// An unarmed Reach returns; an armed one kills the process with SIGKILL after one log line,
// running no deferred function.
func TestReach(t *testing.T) {
	if os.Getenv("FAULTPOINT_CHILD") == "1" {
		Reach(SchedulerBeforePublish) // not armed in the child
		defer os.Stdout.WriteString("deferred ran\n")
		Reach(LauncherBeforeRecord)
		os.Stdout.WriteString("after Reach\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestReach$")
	cmd.Env = append(os.Environ(), "FAULTPOINT_CHILD=1", Env+"=nope,"+LauncherBeforeRecord)
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("child did not die: %v\n%s", err, out)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended %v, not by SIGKILL\n%s", ee, out)
	}
	if strings.Contains(string(out), "deferred ran") || strings.Contains(string(out), "after Reach") {
		t.Fatalf("code ran after the fault point:\n%s", out)
	}
	if want := `"faultpoint":"` + LauncherBeforeRecord + `"`; !strings.Contains(string(out), want) || strings.Count(string(out), LogLine) != 1 {
		t.Fatalf("want one line naming %s:\n%s", LauncherBeforeRecord, out)
	}
	if Armed(LauncherBeforeRecord) {
		t.Fatal("nothing is armed in the test process")
	}
}
