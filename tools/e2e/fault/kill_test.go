package fault_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/faultpoint"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// Issue 13's fault matrix: each service killed with SIGKILL at each named step of its work
// (pkg/faultpoint), then started again as its container would be. Whatever the step, the
// system ends where it would have without the fault: no claim with two instances, no instance
// without a claim once the garbage collector's window has passed, every workload pod Running,
// no PodDisruptionBudget violated (checked all along), no node left tainted. Each subtest runs
// on a stack of its own, in parallel with the others.

// scaleUp is the scale-up a scheduler or launcher fault interrupts: the v1 example pool
// (t4g, 2-4 CPUs) and inflate scaled to 6 (1 CPU each): a batch of more than one NodeClaim,
// each with several pods.
func scaleUp(t *testing.T, s *e2e.Stack) {
	t.Helper()
	s.Apply("deploy/examples/v1/default.yaml")
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "6")
}

// scaleUpFault arms the service's fault point, scales up, and waits for the kill; then the
// restarted service must finish the job.
func scaleUpFault(t *testing.T, service, point string) {
	t.Parallel()
	s := e2e.NewStack(t, allServices)
	s.ArmFault(service, point)
	watch(t, s)
	scaleUp(t, s)
	died := s.AwaitFault(service, point, 2*time.Minute)
	settle(t, s, died)
}

func TestFaultSchedulerKilled(t *testing.T) {
	for _, point := range []string{faultpoint.SchedulerClaimCreated, faultpoint.SchedulerMidNomination, faultpoint.SchedulerBeforePublish} {
		t.Run(point, func(t *testing.T) { scaleUpFault(t, "scheduler", point) })
	}
}

func TestFaultLauncherKilled(t *testing.T) {
	for _, point := range []string{faultpoint.LauncherAfterCreateFleet, faultpoint.LauncherBeforeRecord} {
		t.Run(point, func(t *testing.T) { scaleUpFault(t, "launcher", point) })
	}
}

// The terminator's faults interrupt a drain of a node running web pods under a
// PodDisruptionBudget of maxUnavailable 1, begun by a scheduled-change interruption (the
// terminator taints, commits, drains, terminates, releases) or by deleting the NodeClaim
// (committed already: drain, terminate, release); or the voluntary termination of a node
// emptied (the scheduler's leader taints it and deletes its claim; the terminator, killed once
// the instance is terminated, must still release the node and the claim when it restarts).
func TestFaultTerminatorKilled(t *testing.T) {
	interrupt := func(t *testing.T, s *e2e.Stack, _, instance string) {
		require.NoError(t, s.Emu.Interrupt(context.Background(), "scheduled-change", instance))
	}
	deleteClaim := func(t *testing.T, s *e2e.Stack, claim, _ string) {
		s.Kubectl("delete", "nodeclaim", claim, "--wait=false")
	}
	// Voluntary: the pool empties nodes after 5 s, and web leaves (its budget first, so
	// scaling it to 0 is no disruption the budget counts).
	emptiness := func(t *testing.T, s *e2e.Stack, _, _ string) {
		s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p",
			`{"spec":{"disruption":{"consolidationPolicy":"WhenEmpty","consolidateAfter":"5s"}}}`)
		s.Kubectl("delete", "pdb", "web", "-n", "default")
		s.Kubectl("scale", "deployment", "web", "-n", "default", "--replicas", "0")
	}
	for _, c := range []struct {
		point   string
		trigger string
		drain   func(t *testing.T, s *e2e.Stack, claim, instance string)
	}{
		{faultpoint.TerminatorAfterTaint, "interruption", interrupt},
		{faultpoint.TerminatorAfterTerminate, "emptiness", emptiness},
		{faultpoint.TerminatorMidDrain, "interruption", interrupt},
		{faultpoint.TerminatorMidDrain, "nodeclaim-deleted", deleteClaim},
		{faultpoint.TerminatorAfterTerminate, "nodeclaim-deleted", deleteClaim},
	} {
		t.Run(c.point+"/"+c.trigger, func(t *testing.T) {
			t.Parallel()
			s := e2e.NewStack(t, allServices)
			s.Apply("deploy/examples/v1/default.yaml")
			web(t, s, 4)
			_, claim, instance := busiest(t, s, "app=web")
			s.ArmFault("terminator", c.point)
			watch(t, s)
			c.drain(t, s, claim, instance)
			died := s.AwaitFault("terminator", c.point, 2*time.Minute)
			// The restarted terminator finishes the job: without that the drained node's pods
			// would all still run and its claim, being deleted, excuse its taint.
			finished(t, s, claim, instance, 3*time.Minute)
			settle(t, s, died)
		})
	}
}

// The kube-apiserver restarted (same port, same etcd) while a scale-up is under way: the
// services ride it out, and the scale-up completes with nothing lost or done twice.
func TestFaultAPIServerRestartDuringScaleUp(t *testing.T) {
	t.Parallel()
	s := e2e.NewStack(t, allServices)
	watch(t, s)
	scaleUp(t, s)
	require.Eventually(t, func() bool { return len(s.NodeClaims(t)) > 0 }, 90*time.Second, 5*time.Millisecond, "the scheduler is at work")
	restarted := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, s.Cluster.RestartAPIServer(ctx, 0))
	t.Logf("kube-apiserver down and ready again in %s", time.Since(restarted).Round(10*time.Millisecond))
	for _, name := range allServices {
		require.True(t, s.Service(name).Running(), "%s survives the API server's restart", name)
	}
	// A kube-apiserver just started refuses some requests as forbidden until its RBAC
	// authorizer has read the roles: those refusals are its, not the manifests'.
	settleRBAC(t, s, restarted, false)
}
