package awsemu

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

const benchInstances = 5000

var benchOverrides = []ov{
	{"m5.large", "us-east-1a"}, {"m5.large", "us-east-1b"}, {"m5.large", "us-east-1c"},
	{"c5.large", "us-east-1a"}, {"c5.large", "us-east-1b"}, {"c5.large", "us-east-1c"},
	{"r5.large", "us-east-1a"}, {"r5.large", "us-east-1b"}, {"r5.large", "us-east-1c"},
	{"m6i.large", "us-east-1a"}, {"m6i.large", "us-east-1b"}, {"m6i.large", "us-east-1c"},
}

// benchEnv is an emulator holding 5,000 running instances, launched through the SDK.
func benchEnv(b *testing.B) *env {
	b.Helper()
	e := newEnv(b, func(c *Config) { c.PoolCapacity = 100000; c.BootDelay = time.Second })
	img := e.image(b, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	e.template(b, "fw-bench", img, al2UserData)
	for launched := 0; launched < benchInstances; {
		ids := e.launch(b, e.fleet(b, "fw-bench", ec2types.DefaultTargetCapacityTypeSpot, maxFleetCapacity, benchOverrides...))
		if len(ids) == 0 {
			b.Fatal("no instances launched")
		}
		launched += len(ids)
	}
	e.clock.Advance(2 * time.Second)
	return e
}

func BenchmarkCreateFleet(b *testing.B) {
	e := benchEnv(b)
	ctx := context.Background()
	in := e.fleet(b, "fw-bench", ec2types.DefaultTargetCapacityTypeSpot, 1, benchOverrides...)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		in.ClientToken = aws.String(fmt.Sprintf("bench-%d", i))
		out, err := e.ec2.CreateFleet(ctx, in)
		if err != nil || len(out.Instances) != 1 {
			b.Fatalf("CreateFleet: %v", err)
		}
	}
}

func BenchmarkDescribeInstances(b *testing.B) {
	e := benchEnv(b)
	ctx := context.Background()
	one := e.emu.Instances()[2500].ID
	b.Run("by-id", func(b *testing.B) {
		for b.Loop() {
			out, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{one}})
			if err != nil || len(out.Reservations) != 1 {
				b.Fatalf("DescribeInstances: %v", err)
			}
		}
	})
	b.Run("tag-filter-no-match", func(b *testing.B) {
		for b.Loop() {
			_, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
				flt("tag:karpenter.sh/nodepool", "other"), flt("instance-state-name", "running")}})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("page-of-1000", func(b *testing.B) {
		for b.Loop() {
			out, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(1000),
				Filters: []ec2types.Filter{flt("tag:karpenter.sh/nodepool", "default")}})
			if err != nil || len(out.Reservations) != 1000 {
				b.Fatalf("DescribeInstances: %v", err)
			}
		}
	})
	b.Run("all-5000-paged", func(b *testing.B) {
		for b.Loop() {
			n := 0
			p := ec2.NewDescribeInstancesPaginator(e.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(1000)})
			for p.HasMorePages() {
				out, err := p.NextPage(ctx)
				if err != nil {
					b.Fatal(err)
				}
				n += len(out.Reservations)
			}
			if n < benchInstances {
				b.Fatalf("listed %d", n)
			}
		}
	})
}
