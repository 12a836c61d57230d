package fault_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/faultpoint"
	"github.com/fleetwright/fleetwright/pkg/offerings"
	"github.com/fleetwright/fleetwright/pkg/subject"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// describeLag is how late the emulator shows a new instance and its tags in DescribeInstances
// here: longer than the launcher takes to be restarted and handed its intent again.
const describeLag = 20 * time.Second

// Issue 31, item 2: EC2's DescribeInstances is eventually consistent, so the launcher's lookup
// of a claim's instance by its tag can miss an instance an earlier delivery launched. The
// launcher is killed right after CreateFleet answered; before its intent comes back, another
// launch found the offering it got out of capacity, so the retried request differs from the
// first (and so does its ClientToken). At most one instance per claim may come of it
// (the invariants are watched all along), and every pod runs.
func TestFaultRedeliveredLaunchWhileDescribeLags(t *testing.T) {
	t.Parallel()
	s := e2e.NewStack(t, allServices)
	ctx := context.Background()
	require.NoError(t, s.Emu.SetDescribeDelay(ctx, describeLag))
	s.ArmFault("launcher", faultpoint.LauncherAfterCreateFleet)
	watch(t, s)
	scaleUp(t, s)
	deadline := time.Now().Add(2 * time.Minute)
	for s.Service("launcher").Running() {
		require.True(t, time.Now().Before(deadline), "the launcher reaches %s", faultpoint.LauncherAfterCreateFleet)
		time.Sleep(20 * time.Millisecond)
	}
	died := time.Now()
	markLaunchedUnavailable(t, s)
	s.StartService("launcher")
	settle(t, s, died)
}

// markLaunchedUnavailable publishes, as a launcher that met InsufficientInstanceCapacity would,
// the offering of each instance launched for a claim that does not record it: the claim's next
// CreateFleet asks for something else than its first (on-demand for spot), another
// ClientToken.
func markLaunchedUnavailable(t *testing.T, s *e2e.Stack) {
	t.Helper()
	ctx := context.Background()
	recorded := map[string]bool{}
	for _, nc := range s.NodeClaims(t) {
		recorded[nc.Name] = nc.Status.ProviderID != ""
	}
	insts, err := s.Emu.Instances(ctx)
	require.NoError(t, err)
	conn, err := bus.Connect(ctx, bus.Config{URL: s.NATSURL, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	marked := 0
	for _, i := range insts {
		for _, tag := range i.Tags {
			if tag.Key != ec2v1.TagNodeClaim || recorded[tag.Value] {
				continue
			}
			now := time.Now()
			msg := &launchv1.OfferingUnavailable{InstanceType: i.Type, Zone: i.Zone, CapacityType: offerings.CapacityType(i.CapacityType),
				Reason: "InsufficientInstanceCapacity", ObserveTime: timestamppb.New(now), Ttl: durationpb.New(3 * time.Minute),
				ExpireTime: timestamppb.New(now.Add(3 * time.Minute)), NodeClaimName: "another-claim"}
			require.NoError(t, conn.Publish(ctx, conn.Prefix().Of(subject.OfferingsUnavailable), msg, fmt.Sprintf("test/%s", i.ID)))
			t.Logf("marked %s %s %s unavailable, the offering of %s (claim %s)", i.CapacityType, i.Type, i.Zone, i.ID, tag.Value)
			marked++
		}
	}
	require.NotZero(t, marked, "an instance was launched for a claim that does not record it")
}
