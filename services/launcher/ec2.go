package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// EC2API is the launching slice of EC2 (the terminator's is the terminating one); *ec2.Client satisfies it. Tests use the
// real client against the AWS emulator (tools/awsemu).
type EC2API interface {
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	CreateLaunchTemplate(context.Context, *ec2.CreateLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	DeleteLaunchTemplate(context.Context, *ec2.DeleteLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeSecurityGroups(context.Context, *ec2.DescribeSecurityGroupsInput, ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	// CreateTags tags instances launched by Karpenter v0.2x with their adopted claim (legacy.go).
	CreateTags(context.Context, *ec2.CreateTagsInput, ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
	DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// pages yields each page of an AWS SDK paginator (ec2.NewDescribeSubnetsPaginator's and the
// like: pages T, client options O) in turn; an error is yielded once, and ends them.
func pages[T, O any](ctx context.Context, p interface {
	HasMorePages() bool
	NextPage(context.Context, ...func(*O)) (T, error)
}) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if !yield(page, err) || err != nil {
				return
			}
		}
	}
}

// Offering is one pool: instance type × zone × capacity type ("spot" or "on-demand").
type Offering = scheduling.OfferingKey

// InsufficientCapacityError says every requested pool was out of capacity. It lists the pools
// EC2 reported in CreateFleet's errorSet, so callers can mark them unavailable.
type InsufficientCapacityError struct {
	Offerings []Offering
	Message   string
}

func (e *InsufficientCapacityError) Error() string {
	names := make([]string, 0, len(e.Offerings))
	for _, o := range e.Offerings {
		names = append(names, o.String())
	}
	return fmt.Sprintf("insufficient capacity in %d offering(s): %s", len(e.Offerings), strings.Join(names, ", "))
}

// IsInsufficientCapacity reports an *InsufficientCapacityError anywhere in err's chain.
func IsInsufficientCapacity(err error) bool {
	var ice *InsufficientCapacityError
	return errors.As(err, &ice)
}

// iceCodes are the CreateFleet errorSet codes that mean "this pool has no capacity now".
var iceCodes = map[string]bool{
	"InsufficientInstanceCapacity":      true,
	"InsufficientCapacity":              true,
	"MaxSpotInstanceCountExceeded":      true,
	"SpotMaxPriceTooLow":                true,
	"UnfulfillableCapacity":             true,
	"InsufficientFreeAddressesInSubnet": true,
}

// fleetErrors splits a CreateFleet errorSet into unavailable offerings and other errors.
func fleetErrors(out *ec2.CreateFleetOutput) (unavailable []Offering, other []string) {
	for _, e := range out.Errors {
		code, msg := deref(e.ErrorCode), deref(e.ErrorMessage)
		var o Offering
		if lt := e.LaunchTemplateAndOverrides; lt != nil && lt.Overrides != nil {
			o = Offering{InstanceType: string(lt.Overrides.InstanceType), Zone: deref(lt.Overrides.AvailabilityZone), CapacityType: string(e.Lifecycle)}
			if o.CapacityType == "" {
				o.CapacityType = "on-demand"
			}
		}
		if iceCodes[code] && o.InstanceType != "" {
			unavailable = append(unavailable, o)
			continue
		}
		other = append(other, fmt.Sprintf("%s: %s", code, msg))
	}
	return unavailable, other
}

// apiErrorCode returns the AWS error code of err, or "".
func apiErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
