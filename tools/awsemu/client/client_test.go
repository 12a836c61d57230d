package client_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/tools/awsemu"
	"github.com/fleetwright/fleetwright/tools/awsemu/client"
)

func TestAdminClient(t *testing.T) {
	clock := awsemu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	emu, err := awsemu.New(awsemu.Config{Clock: clock})
	require.NoError(t, err)
	srv := httptest.NewServer(emu)
	defer srv.Close()
	c := client.New(srv.URL)
	ctx := context.Background()

	require.NoError(t, c.Healthy(ctx))
	require.NoError(t, c.SetCapacity(ctx, awsemu.CapacityRule{Pool: awsemu.Pool{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}}))
	assert.ErrorContains(t, c.SetCapacity(ctx, awsemu.CapacityRule{Pool: awsemu.Pool{InstanceType: "m5.huge"}}), "unknown instance type")
	require.NoError(t, c.Throttle(ctx, awsemu.Throttle{Service: "ec2", Share: 0.5}))
	assert.ErrorContains(t, c.Throttle(ctx, awsemu.Throttle{Share: 2}), "share")
	assert.ErrorContains(t, c.Interrupt(ctx, awsemu.KindRebalance, "i-0123456789abcdef0"), "no such instance")

	instances, err := c.Instances(ctx)
	require.NoError(t, err)
	assert.Empty(t, instances)
	calls, err := c.Calls(ctx)
	require.NoError(t, err)
	assert.Empty(t, calls, "admin calls are not API calls")
	profiles, err := c.InstanceProfiles(ctx)
	require.NoError(t, err)
	assert.Equal(t, []awsemu.InstanceProfileInfo{{Name: "KarpenterNodeInstanceProfile-demo-cluster", Path: "/", Role: "KarpenterNodeRole-demo-cluster"}}, profiles)
	roles, err := c.Roles(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"KarpenterNodeRole-demo-cluster"}, roles)
	templates, err := c.LaunchTemplates(ctx)
	require.NoError(t, err)
	assert.Empty(t, templates)
	require.NoError(t, c.Reset(ctx))
}
