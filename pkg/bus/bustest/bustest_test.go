package bustest_test

import (
	"testing"
	"time"

	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
)

// A restarted node of a cluster comes back into it (same name, routes and store), not as a
// lone server: JetStream is current on it again and the cluster has a leader.
func TestRestartedClusterNodeRejoins(t *testing.T) {
	srvs := bustest.RunCluster(t, 3)
	srvs[1] = bustest.Restart(t, srvs[1])
	deadline := time.Now().Add(30 * time.Second)
	for {
		if srvs[1].JetStreamIsClustered() && srvs[1].JetStreamIsCurrent() && srvs[1].NumRoutes() >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted node: clustered %v, current %v, routes %d", srvs[1].JetStreamIsClustered(), srvs[1].JetStreamIsCurrent(), srvs[1].NumRoutes())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
