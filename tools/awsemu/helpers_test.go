package awsemu

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/sdkhttp"
)

// env is one emulator behind a real HTTP server with real SDK clients pointed at it.
type env struct {
	emu   *Emulator
	clock *ManualClock
	url   string
	ec2   *ec2.Client // default retries
	sqs   *sqs.Client
	ssm   *ssm.Client
	// ec2Once makes one attempt, for error paths the SDK would retry (throttling).
	ec2Once *ec2.Client
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func sdkConfig(url string, attempts int) aws.Config {
	return aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEMULATOR", "secret", ""),
		RetryMaxAttempts: attempts,
		BaseEndpoint:     aws.String(url),
		HTTPClient:       sdkhttp.Client(awshttp.NewBuildableClient()), // as the services' (sdkhttp_test.go)
	}
}

// newEnv starts an emulator with a manual clock; mutate tweaks its config first.
func newEnv(t testing.TB, mutate func(*Config)) *env {
	t.Helper()
	clock := NewManualClock(epoch)
	cfg := Config{Clock: clock, Seed: 7}
	if mutate != nil {
		mutate(&cfg)
	}
	emu, err := New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go emu.Run(ctx)
	awsCfg := sdkConfig(srv.URL, 3)
	return &env{emu: emu, clock: clock, url: srv.URL, ec2: ec2.NewFromConfig(awsCfg), sqs: sqs.NewFromConfig(awsCfg), ssm: ssm.NewFromConfig(awsCfg),
		ec2Once: ec2.NewFromConfig(sdkConfig(srv.URL, 1))}
}

// spot is the spot price of a type in a zone now, as the emulator models it.
func (e *env) spot(name, zone string) float64 {
	t, _ := catalog.Lookup(name)
	p, _ := e.emu.spotPrice(t, zone, spotStep(e.clock.Now()))
	return p
}

func (e *env) subnet(t testing.TB, zone string) string {
	t.Helper()
	s, ok := e.emu.world.subnetInZone(zone)
	require.True(t, ok, zone)
	return s.ID
}

func (e *env) image(t testing.TB, namePattern string) string {
	t.Helper()
	out, err := e.ec2.DescribeImages(context.Background(), &ec2.DescribeImagesInput{
		Owners:  []string{"amazon"},
		Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{namePattern}}},
	})
	require.NoError(t, err)
	require.NotEmpty(t, out.Images, namePattern)
	return *out.Images[0].ImageId
}

// template creates a launch template with user data and instance tags.
func (e *env) template(t testing.TB, name, imageID, userData string) string {
	t.Helper()
	out, err := e.ec2.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:  aws.String(imageID),
			UserData: aws.String(b64(userData)),
			TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{
				ResourceType: ec2types.ResourceTypeInstance,
				Tags:         []ec2types.Tag{{Key: aws.String("from-template"), Value: aws.String(name)}},
			}},
		},
	})
	require.NoError(t, err)
	return *out.LaunchTemplate.LaunchTemplateId
}

type ov struct{ typ, zone string }

// fleet builds an instant CreateFleet input over overrides for one template.
func (e *env) fleet(t testing.TB, lt string, capacityType ec2types.DefaultTargetCapacityType, n int32, ovs ...ov) *ec2.CreateFleetInput {
	t.Helper()
	var overrides []ec2types.FleetLaunchTemplateOverridesRequest
	for _, o := range ovs {
		overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{
			InstanceType: ec2types.InstanceType(o.typ), SubnetId: aws.String(e.subnet(t, o.zone)), AvailabilityZone: aws.String(o.zone),
		})
	}
	return &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
			Overrides:                   overrides,
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(n), DefaultTargetCapacityType: capacityType,
		},
		SpotOptions:     &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
		OnDemandOptions: &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeInstance,
			Tags:         []ec2types.Tag{{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")}},
		}},
	}
}

// launch runs a fleet and returns its instance IDs.
func (e *env) launch(t testing.TB, in *ec2.CreateFleetInput) []string {
	t.Helper()
	out, err := e.ec2.CreateFleet(context.Background(), in)
	require.NoError(t, err)
	var ids []string
	for _, fi := range out.Instances {
		ids = append(ids, fi.InstanceIds...)
	}
	return ids
}
