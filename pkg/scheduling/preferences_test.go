package scheduling

import (
	"strings"
	"testing"
)

// Preferences are relaxed as Karpenter relaxes them (RespectPreferences): a pod's own preferred
// terms hold until it cannot be placed, then go one at a time, the heaviest preferred pod
// anti-affinity term first; another pod's preferred anti-affinity never keeps a pod out
// (Karpenter tracks the inverse of required anti-affinity only). On Karpenter's preference
// benchmark — a zone anti-affinity preference of weight 10 that cannot hold past the first pod
// in the preferred zone, a hostname one of weight 1 — every pod keeps the hostname term and the
// zone it prefers: one pod per node, all in test-zone-1. Ignore drops every preference: the
// pods pack together.
func TestPreferencesRelaxAsKarpenter(t *testing.T) {
	const pods = 12
	for _, tc := range []struct {
		name    string
		policy  PreferencePolicy
		claims  func(n int) bool
		podsPer func(n int) bool
		relaxed func(desc string) bool
		zone    string
	}{{
		name:    "Respect (default)",
		claims:  func(n int) bool { return n == pods },
		podsPer: func(n int) bool { return n == 1 },
		relaxed: func(d string) bool { return strings.Contains(d, "weight 10, topology key topology.kubernetes.io/zone") },
		zone:    "test-zone-1",
	}, {
		name:    "Ignore",
		policy:  PreferenceIgnore,
		claims:  func(n int) bool { return n < pods/2 },
		podsPer: func(n int) bool { return n >= 1 },
		relaxed: func(string) bool { return false },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Pods: preferencePods(pods), NodePools: []NodePool{karpenterPool()}, InstanceTypes: karpenterTypes(), PreferencePolicy: tc.policy}
			plan, err := Solve(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Unschedulable) != 0 {
				t.Fatalf("%d unschedulable: %s", len(plan.Unschedulable), plan.Unschedulable[0].Reason)
			}
			checkPlan(t, in, plan)
			if !tc.claims(len(plan.NodeClaims)) {
				t.Errorf("%d claims", len(plan.NodeClaims))
			}
			for _, c := range plan.NodeClaims {
				if !tc.podsPer(len(c.PodUIDs)) {
					t.Errorf("claim %s holds %d pods", c.Name, len(c.PodUIDs))
				}
				if tc.zone != "" && (len(c.Zones) != 1 || c.Zones[0] != tc.zone) {
					t.Errorf("claim %s in zones %v, want %s (the pods' preferred zone)", c.Name, c.Zones, tc.zone)
				}
			}
			for _, r := range plan.Relaxations {
				if !tc.relaxed(r.Description) {
					t.Errorf("pod %s: %s", r.PodUID, r.Description)
				}
			}
		})
	}
}
