package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/sdkhttp"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	"github.com/fleetwright/fleetwright/tools/awsemu"
)

// emulatedAWS is an emulator in region with real EC2 and Pricing clients pointed at it; the
// Pricing client makes one attempt per call, so that a throttled API fails at once.
func emulatedAWS(t *testing.T, region string) (*awsemu.Emulator, *ec2.Client, *pricing.Client) {
	t.Helper()
	emu, err := awsemu.New(awsemu.Config{Region: region, BootDelay: awsemu.NoDelay})
	require.NoError(t, err)
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("x", "x", ""),
		BaseEndpoint: aws.String(srv.URL), HTTPClient: sdkhttp.Client(awshttp.NewBuildableClient())}
	once := cfg.Copy()
	once.RetryMaxAttempts = 1
	return emu, ec2.NewFromConfig(cfg), pricing.NewFromConfig(once)
}

// offering finds a type's offering of a capacity type in a zone.
func offering(t *testing.T, cat *catalogv1.Catalog, name, zone string, ct commonv1.CapacityType) *catalogv1.Offering {
	t.Helper()
	for _, it := range cat.InstanceTypes {
		if it.Name != name {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == ct {
				return o
			}
		}
	}
	t.Fatalf("no %s offering of %s in %s", ct, name, zone)
	return nil
}

func hasType(cat *catalogv1.Catalog, name string) bool {
	for _, it := range cat.InstanceTypes {
		if it.Name == name {
			return true
		}
	}
	return false
}

// In eu-west-1 the catalog is priced by eu-west-1's prices: on-demand from the Pricing API
// (m5.large $0.107/h there, $0.096 in us-east-1), spot within eu-west-1's real range; the types
// neither the API nor the embedded table prices there are left out and reported.
func TestCatalogIsPricedByItsRegion(t *testing.T) {
	_, api, pricingAPI := emulatedAWS(t, "eu-west-1")
	b := catalogBuilder{api: api, region: "eu-west-1", spotModelled: true, now: time.Now,
		onDemand: &onDemandPrices{api: pricingAPI, region: "eu-west-1", every: 12 * time.Hour, now: time.Now}}
	cat, report, err := b.build(context.Background())
	require.NoError(t, err)
	require.NoError(t, report.apiErr)

	assert.Equal(t, 0.107, offering(t, cat, "m5.large", "eu-west-1a", commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND).PriceUsdPerHour)
	assert.Equal(t, 0.11012, offering(t, cat, "c7a.large", "eu-west-1b", commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND).PriceUsdPerHour)
	spot := offering(t, cat, "m5.large", "eu-west-1a", commonv1.CapacityType_CAPACITY_TYPE_SPOT)
	assert.True(t, spot.PriceUsdPerHour >= 0.0475 && spot.PriceUsdPerHour <= 0.0483, "spot %v within eu-west-1's range", spot.PriceUsdPerHour)
	assert.True(t, spot.PriceIsModelled, "the emulator's spot prices are modelled")

	assert.Equal(t, len(cat.InstanceTypes), report.api+report.embedded)
	assert.Greater(t, report.api, 500)
	assert.NotEmpty(t, report.unpriced, "the emulator offers every type; eu-west-1 does not price them all")
	for _, name := range report.unpriced {
		_, ok := catalog.OnDemandPrice("eu-west-1", name)
		assert.False(t, ok, "%s has an embedded eu-west-1 price but was left out", name)
		assert.False(t, hasType(cat, name))
	}
	assert.Contains(t, cat.Source, "AWS Pricing API GetProducts")
	assert.Contains(t, cat.Source, "types left out, unpriced")
}

// The Pricing API throttled (as unreachable): the embedded eu-west-1 table prices the catalog,
// and the source says so; once the API answers, the next build takes its prices.
func TestCatalogFallsBackToTheEmbeddedTable(t *testing.T) {
	emu, api, pricingAPI := emulatedAWS(t, "eu-west-1")
	require.NoError(t, emu.SetThrottle(awsemu.Throttle{Service: "pricing", Share: 1}))
	b := catalogBuilder{api: api, region: "eu-west-1", spotModelled: true, now: time.Now,
		onDemand: &onDemandPrices{api: pricingAPI, region: "eu-west-1", every: 12 * time.Hour, now: time.Now}}
	cat, report, err := b.build(context.Background())
	require.NoError(t, err, "a Pricing API failure does not fail the catalog")
	require.Error(t, report.apiErr)
	assert.Zero(t, report.api)
	assert.Equal(t, len(cat.InstanceTypes), report.embedded)
	assert.Equal(t, 0.107, offering(t, cat, "m5.large", "eu-west-1a", commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND).PriceUsdPerHour)
	assert.Contains(t, cat.Source, "embedded eu-west-1 table")
	assert.NotContains(t, cat.Source, "Pricing API")

	require.NoError(t, emu.SetThrottle(awsemu.Throttle{}))
	cat, report, err = b.build(context.Background())
	require.NoError(t, err)
	require.NoError(t, report.apiErr, "a failed ask is tried again at the next build, not 12h later")
	assert.Equal(t, len(cat.InstanceTypes), report.api)
}

// fakePricing answers GetProducts from a fixed list of price-list entries, or fails.
type fakePricing struct {
	entries []string
	err     error
	calls   int
}

func (f *fakePricing) GetProducts(_ context.Context, in *pricing.GetProductsInput, _ ...func(*pricing.Options)) (*pricing.GetProductsOutput, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	for _, flt := range in.Filters {
		if aws.ToString(flt.Field) == "productFamily" && strings.Contains(aws.ToString(flt.Value), "bare metal") {
			return &pricing.GetProductsOutput{}, nil
		}
	}
	return &pricing.GetProductsOutput{PriceList: f.entries}, nil
}

func entry(name, usd string) string {
	return `{"product":{"attributes":{"instanceType":"` + name + `"}},"terms":{"OnDemand":{"A.B":{"priceDimensions":{"A.B.C":{"pricePerUnit":{"USD":"` + usd + `"}}}}}}}`
}

// The API's price wins over the table's; a type the API does not price takes the table's; the
// API is asked again only once its refresh is due, and keeps its last prices when it fails.
func TestOnDemandPricesRefreshAndFallBack(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	api := &fakePricing{entries: []string{entry("m5.large", "0.5000000000"), entry("c5.large", "0"), `not json`, entry("", "1")}}
	p := &onDemandPrices{api: api, region: "eu-west-1", every: 12 * time.Hour, now: func() time.Time { return now }}
	prices, fetched, err := p.current(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"m5.large": 0.5}, prices, "zero prices and unreadable entries are skipped")
	assert.Equal(t, now, fetched)
	assert.Equal(t, 2, api.calls, "one query for shared tenancy, one for bare metal")

	got, src := onDemandPrice(prices, "eu-west-1", "m5.large")
	assert.Equal(t, 0.5, got)
	assert.Equal(t, priceAPI, src)
	got, src = onDemandPrice(prices, "eu-west-1", "c5.large")
	assert.Equal(t, priceEmbedded, src)
	want, _ := catalog.OnDemandPrice("eu-west-1", "c5.large")
	assert.Equal(t, want, got)
	_, src = onDemandPrice(prices, "eu-west-1", "nope.large")
	assert.Equal(t, priceUnknown, src)

	now = now.Add(time.Hour)
	_, _, err = p.current(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, api.calls, "not due: not asked")

	now = now.Add(12 * time.Hour)
	api.err = errors.New("unreachable")
	prices, fetched, err = p.current(context.Background())
	require.Error(t, err)
	assert.Equal(t, 0.5, prices["m5.large"], "the last prices are kept")
	assert.Equal(t, now.Add(-13*time.Hour), fetched)

	api.err, api.entries = nil, nil
	_, _, err = p.current(context.Background())
	require.Error(t, err, "an API with no prices at all is a failure, not an empty table")

	off := &onDemandPrices{api: api, region: "eu-west-1", every: 0, now: time.Now}
	calls := api.calls
	prices, _, err = off.current(context.Background())
	assert.NoError(t, err)
	assert.Nil(t, prices)
	assert.Equal(t, calls, api.calls, "refresh 0 never asks")
}

func TestPricingAPIRegion(t *testing.T) {
	for region, want := range map[string]string{"us-east-1": "us-east-1", "us-west-2": "us-east-1", "eu-west-1": "eu-central-1",
		"ap-southeast-2": "ap-south-1", "cn-north-1": "cn-northwest-1", "sa-east-1": "us-east-1"} {
		assert.Equal(t, want, pricingAPIRegion(region), region)
	}
}
