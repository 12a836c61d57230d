package main

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// fleetAnswer is an EC2API whose CreateFleet answers as told; nothing else is called.
type fleetAnswer struct {
	EC2API
	out *ec2.CreateFleetOutput
}

func (f fleetAnswer) CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	return f.out, nil
}

// Each CreateFleet call is a span of the launch's trace: what was asked (the types, how many
// overrides), and the offering EC2 launched, or the capacity errors that launched none.
func TestCreateFleetIsASpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	req := fleetRequest{ClaimUID: "uid-1", CapacityType: "spot",
		InstanceTypes: []fleetType{{Name: "t4g.medium", LaunchTemplate: "lt-1"}, {Name: "t4g.large", LaunchTemplate: "lt-1"}},
		Subnets:       []subnet{{ID: "subnet-a", Zone: "us-east-1a"}}}

	launchedOut := &ec2.CreateFleetOutput{Instances: []ec2types.CreateFleetInstance{{InstanceIds: []string{"i-1"}, InstanceType: "t4g.medium",
		Lifecycle: "spot", LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{
			Overrides: &ec2types.FleetLaunchTemplateOverrides{AvailabilityZone: aws.String("us-east-1a"), SubnetId: aws.String("subnet-a")}}}}}
	_, _, err := createFleet(context.Background(), fleetAnswer{out: launchedOut}, req)
	require.NoError(t, err)
	iceOut := &ec2.CreateFleetOutput{Errors: []ec2types.CreateFleetError{{ErrorCode: aws.String("InsufficientInstanceCapacity"),
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
			InstanceType: "t4g.medium", AvailabilityZone: aws.String("us-east-1a"), SubnetId: aws.String("subnet-a")}}}}}
	_, _, err = createFleet(context.Background(), fleetAnswer{out: iceOut}, req)
	require.Error(t, err)

	spans := rec.Ended()
	require.Len(t, spans, 2)
	attrs := func(s sdktrace.ReadOnlySpan) map[string]string {
		out := map[string]string{}
		for _, kv := range s.Attributes() {
			out[string(kv.Key)] = kv.Value.Emit()
		}
		return out
	}
	ok, ice := attrs(spans[0]), attrs(spans[1])
	assert.Equal(t, "EC2.CreateFleet", spans[0].Name())
	assert.Equal(t, "CreateFleet", ok["rpc.method"])
	assert.Equal(t, "2", ok["fleetwright.overrides"])
	assert.Equal(t, `["t4g.medium","t4g.large"]`, ok["fleetwright.instance_types"])
	assert.Equal(t, "i-1", ok["fleetwright.instance_id"])
	assert.Equal(t, "t4g.medium", ok["fleetwright.instance_type"])
	assert.Equal(t, "us-east-1a", ok["fleetwright.zone"])
	assert.Equal(t, "spot", ok["fleetwright.capacity_type"])
	assert.Equal(t, codes.Unset, spans[0].Status().Code)

	assert.Equal(t, codes.Error, spans[1].Status().Code, "no instance: the span failed")
	assert.Equal(t, "1", ice["fleetwright.offerings_unavailable"])
	assert.Empty(t, ice["fleetwright.instance_id"])
}
