package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

// PricingAPI is the part of the AWS Price List Query API the launcher reads.
type PricingAPI interface {
	GetProducts(context.Context, *pricing.GetProductsInput, ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

// pricingAPIRegion is where the Price List Query API has an endpoint nearest a region: it has
// none in most, as Karpenter's pricing provider knows.
func pricingAPIRegion(region string) string {
	switch {
	case strings.HasPrefix(region, "ap-"):
		return "ap-south-1"
	case strings.HasPrefix(region, "eu-"):
		return "eu-central-1"
	case strings.HasPrefix(region, "cn-"):
		return "cn-northwest-1"
	}
	return "us-east-1"
}

// onDemandPrices are the region's Linux on-demand prices from the Pricing API, asked again
// every `every`; a failed ask keeps what the last one gave and is tried again at the next
// catalog refresh. every 0 never asks (the embedded table alone, as in an isolated VPC).
type onDemandPrices struct {
	api    PricingAPI
	region string
	every  time.Duration
	now    func() time.Time

	mu      sync.Mutex
	prices  map[string]float64 // type → USD/h, the last answer that had any
	fetched time.Time          // when prices were fetched
	lastErr error              // of the last ask, nil once one works
}

// pricingTimeout bounds one refresh of every page: an unreachable endpoint must not hold the
// catalog back for long.
const pricingTimeout = 30 * time.Second

// current returns the prices the API last gave and when, refreshing them first when due. err
// is the last ask's failure (the prices may then be older ones, or none).
func (p *onDemandPrices) current(ctx context.Context) (map[string]float64, time.Time, error) {
	if p == nil || p.every <= 0 || p.api == nil {
		return nil, time.Time{}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prices == nil || p.lastErr != nil || p.now().Sub(p.fetched) >= p.every {
		fctx, cancel := context.WithTimeout(ctx, pricingTimeout)
		prices, err := p.fetch(fctx)
		cancel()
		if err == nil && len(prices) == 0 {
			err = errors.New("the Pricing API has no Linux on-demand prices for " + p.region)
		}
		p.lastErr = err
		if err == nil {
			p.prices, p.fetched = prices, p.now()
		}
	}
	return p.prices, p.fetched, p.lastErr
}

// fetch asks for every Linux on-demand product of the region, as Karpenter does: instances of
// shared tenancy, and bare-metal ones (their own product family, Dedicated).
func (p *onDemandPrices) fetch(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	for _, kind := range [][2]string{{"Shared", "Compute Instance"}, {"Dedicated", "Compute Instance (bare metal)"}} {
		in := &pricing.GetProductsInput{
			ServiceCode: aws.String("AmazonEC2"), FormatVersion: aws.String("aws_v1"), MaxResults: aws.Int32(100),
			Filters: []pricingtypes.Filter{
				termMatch("regionCode", p.region), termMatch("serviceCode", "AmazonEC2"), termMatch("operatingSystem", "Linux"),
				termMatch("preInstalledSw", "NA"), termMatch("capacitystatus", "Used"), termMatch("marketoption", "OnDemand"),
				termMatch("tenancy", kind[0]), termMatch("productFamily", kind[1]),
			},
		}
		for page, err := range pages(ctx, pricing.NewGetProductsPaginator(p.api, in)) {
			if err != nil {
				return nil, fmt.Errorf("getting on-demand prices for %s (%s): %w", p.region, kind[1], err)
			}
			for _, raw := range page.PriceList {
				if name, price, ok := onDemandPriceOf(raw); ok {
					out[name] = price
				}
			}
		}
	}
	return out, nil
}

func termMatch(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
}

// onDemandPriceOf reads a price-list entry (aws_v1): the instance type and the USD price per
// unit of its on-demand term. An entry without both, or priced at zero, gives nothing.
func onDemandPriceOf(raw string) (string, float64, bool) {
	var item struct {
		Product struct {
			Attributes struct {
				InstanceType string `json:"instanceType"`
			} `json:"attributes"`
		} `json:"product"`
		Terms struct {
			OnDemand map[string]struct {
				PriceDimensions map[string]struct {
					PricePerUnit map[string]string `json:"pricePerUnit"`
				} `json:"priceDimensions"`
			} `json:"OnDemand"`
		} `json:"terms"`
	}
	if err := json.Unmarshal([]byte(raw), &item); err != nil || item.Product.Attributes.InstanceType == "" {
		return "", 0, false
	}
	for _, term := range item.Terms.OnDemand {
		for _, d := range term.PriceDimensions {
			if price, err := strconv.ParseFloat(d.PricePerUnit["USD"], 64); err == nil && price > 0 {
				return item.Product.Attributes.InstanceType, price, true
			}
		}
	}
	return "", 0, false
}

// priceSource says where a type's on-demand price came from.
type priceSource int

const (
	priceUnknown  priceSource = iota // no price: the type is left out
	priceAPI                         // the Pricing API
	priceEmbedded                    // the embedded per-region table (pkg/catalog)
)

// onDemandPrice picks a type's price: the API's, else the embedded table's for the region.
func onDemandPrice(api map[string]float64, region, name string) (float64, priceSource) {
	if p, ok := api[name]; ok && p > 0 {
		return p, priceAPI
	}
	if p, ok := catalog.OnDemandPrice(region, name); ok {
		return p, priceEmbedded
	}
	return 0, priceUnknown
}
