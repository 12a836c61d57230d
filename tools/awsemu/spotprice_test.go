package awsemu

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

// The region decides the prices: eu-west-1's spot history stays within eu-west-1's real range
// (m5.large $0.0475–0.0483/h), not us-east-1's ($0.0315–0.0383/h).
func TestSpotPricesAreTheRegions(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Region = "eu-west-1" })
	out, err := e.ec2.DescribeSpotPriceHistory(context.Background(), &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{"m5.large"}, StartTime: aws.Time(e.clock.Now())})
	require.NoError(t, err)
	require.Len(t, out.SpotPriceHistory, 3)
	for _, p := range out.SpotPriceHistory {
		got, err := strconv.ParseFloat(*p.SpotPrice, 64)
		require.NoError(t, err)
		assert.True(t, got >= 0.0475 && got <= 0.0483, "%s: %v within eu-west-1's range", *p.AvailabilityZone, got)
		assert.Regexp(t, `^eu-west-1[abc]$`, *p.AvailabilityZone)
	}
}

// StartTime a day back gives the 25 hourly points of each zone, newest first, each stamped with
// the hour it began; the prices move; pages of 10 give the same rows as one call.
func TestSpotPriceHistoryOverTime(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	now := e.clock.Now()
	in := &ec2.DescribeSpotPriceHistoryInput{InstanceTypes: []ec2types.InstanceType{"m5.large"},
		AvailabilityZone: aws.String("us-east-1a"), StartTime: aws.Time(now.Add(-24 * time.Hour)), EndTime: aws.Time(now)}
	out, err := e.ec2.DescribeSpotPriceHistory(ctx, in)
	require.NoError(t, err)
	require.Len(t, out.SpotPriceHistory, 25)
	lo, hi, _ := catalog.SpotPriceRange("us-east-1", "m5.large")
	prices := map[string]bool{}
	for i, p := range out.SpotPriceHistory {
		assert.Equal(t, now.Truncate(time.Hour).Add(-time.Duration(i)*time.Hour).UTC(), p.Timestamp.UTC(), "point %d", i)
		got, _ := strconv.ParseFloat(*p.SpotPrice, 64)
		assert.True(t, got >= lo && got <= hi, "%v in %v..%v", got, lo, hi)
		prices[*p.SpotPrice] = true
	}
	assert.Greater(t, len(prices), 5, "the price moves over a day")
	assert.InDelta(t, e.spot("m5.large", "us-east-1a"), mustFloat(t, *out.SpotPriceHistory[0].SpotPrice), 1e-9, "the newest point is the price now")

	var paged []ec2types.SpotPrice
	pin := *in
	pin.MaxResults = aws.Int32(10)
	for page, err := range pagesOf(ctx, ec2.NewDescribeSpotPriceHistoryPaginator(e.ec2, &pin)) {
		require.NoError(t, err)
		paged = append(paged, page.SpotPriceHistory...)
	}
	require.Len(t, paged, 25)
	for i := range paged {
		assert.Equal(t, *out.SpotPriceHistory[i].SpotPrice, *paged[i].SpotPrice)
		assert.Equal(t, *out.SpotPriceHistory[i].Timestamp, *paged[i].Timestamp)
	}

	// An hour later the price in effect is the next step's.
	e.clock.Advance(time.Hour)
	later, err := e.ec2.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{InstanceTypes: []ec2types.InstanceType{"m5.large"},
		AvailabilityZone: aws.String("us-east-1a"), StartTime: aws.Time(e.clock.Now())})
	require.NoError(t, err)
	require.Len(t, later.SpotPriceHistory, 1)
	assert.Equal(t, now.Truncate(time.Hour).Add(time.Hour).UTC(), later.SpotPriceHistory[0].Timestamp.UTC())

	// Steady prices do not move.
	steady := newEnv(t, func(c *Config) { c.SteadySpotPrices = true })
	flat, err := steady.ec2.DescribeSpotPriceHistory(ctx, in)
	require.NoError(t, err)
	require.Len(t, flat.SpotPriceHistory, 25)
	for _, p := range flat.SpotPriceHistory {
		assert.Equal(t, *flat.SpotPriceHistory[0].SpotPrice, *p.SpotPrice)
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return f
}

// pagesOf ranges over a paginator's pages.
func pagesOf(ctx context.Context, p *ec2.DescribeSpotPriceHistoryPaginator) func(func(*ec2.DescribeSpotPriceHistoryOutput, error) bool) {
	return func(yield func(*ec2.DescribeSpotPriceHistoryOutput, error) bool) {
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if !yield(out, err) || err != nil {
				return
			}
		}
	}
}
