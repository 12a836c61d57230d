package e2e

import (
	"fmt"
	"strings"
	"time"

	"github.com/fleetwright/fleetwright/pkg/faultpoint"
)

// ArmFault restarts a running service with the fault point armed (faultpoint.Env): the next
// time it reaches that step it kills itself with SIGKILL.
func (s *Stack) ArmFault(name, point string) {
	s.t.Helper()
	s.services[name].Kill()
	s.StartServiceEnv(name, faultpoint.Env+"="+point)
	if name == "scheduler" {
		s.Leading()
	}
}

// AwaitFault waits until the service has died at the armed fault point — its process is gone
// and its log has the fault point's line — then starts it again, unarmed, as its container
// would be restarted; it returns when the service died (as seen here). The test fails if the
// service did not die in time, or died of something else.
func (s *Stack) AwaitFault(name, point string, within time.Duration) time.Time {
	s.t.Helper()
	svc := s.services[name]
	deadline := time.Now().Add(within)
	for svc.Running() {
		if time.Now().After(deadline) {
			svc.DumpLog()
			s.t.Fatalf("%s did not reach fault point %s within %s", name, point, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	died := time.Now()
	if !diedAt(svc.Log(), point) {
		svc.DumpLog()
		s.t.Fatalf("%s died (%v), but not at fault point %s", name, svc.ExitError(), point)
	}
	s.t.Logf("%s died at fault point %s; restarting it", name, point)
	s.StartService(name)
	if name == "scheduler" {
		s.Leading()
	}
	return died
}

// diedAt reports whether the log (of one run of the service) has the fault point's line.
func diedAt(log, point string) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, fmt.Sprintf("%q:%q", "faultpoint", point)) && strings.Contains(line, faultpoint.LogLine) {
			return true
		}
	}
	return false
}
