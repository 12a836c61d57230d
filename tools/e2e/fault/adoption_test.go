package fault_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/faultpoint"
	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/e2e/migrate"
)

// Issue 31, item 1: the launcher killed in the middle of adopting a Karpenter v0.2x node,
// between making its NodeClaim and tagging its instance with it. Whatever the order of the two
// steps, no instance may be left tagged for a claim that does not exist: the orphan collector
// would end it, with its pods running and no drain. The restarted launcher finishes the
// adoption; every v0.2x instance is still running once the garbage collector's window has
// passed, each with its claim, and the pods never moved.
func TestFaultLauncherKilledMidAdoption(t *testing.T) {
	t.Parallel()
	s := e2e.NewStack(t, allServices)
	s.Apply("deploy/examples/v1alpha5/default.yaml")
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "3")
	podsRunning(t, s, "app=inflate", 3, 3*time.Minute)
	require.Eventually(t, func() bool {
		for _, nc := range s.NodeClaims(t) {
			if !nc.IsTrue(karpv1.ConditionTypeInitialized) {
				return false
			}
		}
		return true
	}, time.Minute, 250*time.Millisecond, "every claim is initialized")
	for _, name := range allServices {
		s.Service(name).Kill()
	}
	instanceOf := migrate.AsKarpenterV1Alpha5(t, s, "default")
	placed := podNodes(t, s)

	for _, name := range allServices {
		if name == "launcher" {
			s.StartServiceEnv(name, faultpoint.Env+"="+faultpoint.LauncherMidAdoption)
		} else {
			s.StartService(name)
		}
	}
	s.Leading()
	died := s.AwaitFault("launcher", faultpoint.LauncherMidAdoption, 2*time.Minute)
	watch(t, s)
	require.Eventually(t, func() bool {
		adopted := 0
		for _, nc := range s.NodeClaims(t) {
			if nc.IsTrue(karpv1.ConditionTypeInitialized) && instanceOf[nc.Status.NodeName] == ec2v1.InstanceID(nc.Status.ProviderID) {
				adopted++
			}
		}
		return adopted == len(instanceOf)
	}, 2*time.Minute, 250*time.Millisecond, "the restarted launcher adopts every v0.2x node")
	if wait := time.Until(died.Add(gcWindow)); wait > 0 {
		time.Sleep(wait) // the orphan collector has had its chance
	}
	insts, err := s.Emu.Instances(context.Background())
	require.NoError(t, err)
	state := map[string]string{}
	for _, i := range insts {
		state[i.ID] = i.State
	}
	for node, id := range instanceOf {
		assert.Equal(t, "running", state[id], "the instance of v0.2x node %s keeps running", node)
	}
	assert.Equal(t, placed, podNodes(t, s), "no pod moved")
	settle(t, s, died)
}

// podNodes maps each inflate pod to its node.
func podNodes(t *testing.T, s *e2e.Stack) map[string]string {
	t.Helper()
	pods, err := s.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=inflate"})
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = p.Spec.NodeName
	}
	return out
}
