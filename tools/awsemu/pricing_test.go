package awsemu

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

func term(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
}

// linuxOnDemand are the filters Karpenter's pricing provider sends, less the region.
func linuxOnDemand(tenancy, family string) []pricingtypes.Filter {
	return []pricingtypes.Filter{term("serviceCode", "AmazonEC2"), term("preInstalledSw", "NA"), term("operatingSystem", "Linux"),
		term("capacitystatus", "Used"), term("marketoption", "OnDemand"), term("tenancy", tenancy), term("productFamily", family)}
}

// priceItem is what clients read of a price-list entry (Karpenter's own reading).
type priceItem struct {
	Product struct {
		Attributes map[string]string
	}
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				PricePerUnit map[string]string
			}
		}
	}
}

// pricesOf reads every page of a GetProducts answer into type → USD/h, region by region.
func pricesOf(t *testing.T, c *pricing.Client, in *pricing.GetProductsInput) map[string]map[string]float64 {
	t.Helper()
	out := map[string]map[string]float64{}
	p := pricing.NewGetProductsPaginator(c, in)
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, raw := range page.PriceList {
			var it priceItem
			require.NoError(t, json.Unmarshal([]byte(raw), &it))
			region, name := it.Product.Attributes["regionCode"], it.Product.Attributes["instanceType"]
			for _, term := range it.Terms.OnDemand {
				for _, d := range term.PriceDimensions {
					f, err := strconv.ParseFloat(d.PricePerUnit["USD"], 64)
					require.NoError(t, err)
					if out[region] == nil {
						out[region] = map[string]float64{}
					}
					out[region][name] = f
				}
			}
		}
	}
	return out
}

func pricingClient(e *env, attempts int) *pricing.Client {
	return pricing.NewFromConfig(sdkConfig(e.url, attempts))
}

// Karpenter's query for one region through the real SDK client: every type the table prices in
// eu-west-1, at eu-west-1's price, and nothing of another region; the emulator's own region
// (us-east-1 here) does not limit what the API serves.
func TestGetProductsServesEveryRegionsPrices(t *testing.T) {
	e := newEnv(t, nil)
	c := pricingClient(e, 3)
	shared := pricesOf(t, c, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(100),
		Filters: append(linuxOnDemand("Shared", "Compute Instance"), term("regionCode", "eu-west-1"))})
	metal := pricesOf(t, c, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(100),
		Filters: append(linuxOnDemand("Dedicated", "Compute Instance (bare metal)"), term("regionCode", "eu-west-1"))})
	require.Len(t, shared, 1)
	require.Len(t, metal, 1)
	assert.Equal(t, 0.107, shared["eu-west-1"]["m5.large"])
	assert.Equal(t, 0.11012, shared["eu-west-1"]["c7a.large"])
	assert.NotContains(t, shared["eu-west-1"], "m5.metal", "bare metal is its own product family")
	assert.Contains(t, metal["eu-west-1"], "m5.metal")
	want := catalog.PricedTypes("eu-west-1")
	assert.Equal(t, len(want), len(shared["eu-west-1"])+len(metal["eu-west-1"]))

	// The location name selects the same region.
	byLocation := pricesOf(t, c, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"),
		Filters: []pricingtypes.Filter{term("location", "Europe (Ireland)"), term("instanceType", "m5.large")}})
	assert.Equal(t, map[string]map[string]float64{"eu-west-1": {"m5.large": 0.107}}, byLocation)

	// No region filter: every region that prices the type.
	everywhere := pricesOf(t, c, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"),
		Filters: []pricingtypes.Filter{term("instanceType", "m5.large"), term("operatingSystem", "Linux")}})
	assert.Greater(t, len(everywhere), 20)
	assert.Equal(t, 0.096, everywhere["us-east-1"]["m5.large"])

	// A filter on something no product has, or another OS, matches nothing.
	none := pricesOf(t, c, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"),
		Filters: []pricingtypes.Filter{term("operatingSystem", "Windows"), term("instanceType", "m5.large")}})
	assert.Empty(t, none)
}

func TestGetProductsPagesAndErrors(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	c := pricingClient(e, 1)
	in := &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(7),
		Filters: []pricingtypes.Filter{term("regionCode", "eu-west-1"), term("instanceType", "m5.large")}}
	out, err := c.GetProducts(ctx, in)
	require.NoError(t, err)
	assert.Len(t, out.PriceList, 1)
	assert.Nil(t, out.NextToken)

	in.Filters = []pricingtypes.Filter{term("regionCode", "eu-west-1"), term("tenancy", "Shared")}
	first, err := c.GetProducts(ctx, in)
	require.NoError(t, err)
	require.Len(t, first.PriceList, 7)
	require.NotNil(t, first.NextToken)
	all := pricesOf(t, c, in)
	assert.Greater(t, len(all["eu-west-1"]), 500, "pages of 7 reach every product")

	_, err = c.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(101)})
	var bad *pricingtypes.InvalidParameterException
	assert.ErrorAs(t, err, &bad)
	_, err = c.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), NextToken: aws.String("garbage")})
	var badToken *pricingtypes.InvalidNextTokenException
	assert.ErrorAs(t, err, &badToken)

	require.NoError(t, e.emu.SetThrottle(Throttle{Service: "pricing", Share: 1}))
	_, err = c.GetProducts(ctx, in)
	var throttled *pricingtypes.ThrottlingException
	assert.ErrorAs(t, err, &throttled)
}
