package awsemu

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

// This file answers the AWS Price List Query API (JSON 1.1, X-Amz-Target
// AWSPriceListService.<Operation>) for the one call Karpenter and Fleetwright make:
// GetProducts of service AmazonEC2, from which they read Linux on-demand prices. It serves
// every region of the embedded per-region table (catalog.PricedTypes, catalog.OnDemandPrice),
// whatever the emulator's own region, as the real API (an endpoint in us-east-1) does.
//
// Each product is one instance type in one region, Linux, no pre-installed software, capacity
// status Used, with one on-demand term; its attributes are those the price list has for such a
// product. Bare-metal types are, as in the real price list, of product family "Compute Instance
// (bare metal)" and tenancy Dedicated; the others "Compute Instance" and Shared.

// pricingProduct is one product with the attributes filters match on.
type pricingProduct struct {
	family     string
	attributes map[string]string
	price      float64
	sku        string
}

// pricingProducts lists every product, sorted by region then type; built once.
var pricingProducts = sync.OnceValue(func() []pricingProduct {
	var out []pricingProduct
	for _, region := range catalog.PriceRegions() {
		location, _ := catalog.Location(region)
		for _, name := range catalog.PricedTypes(region) {
			price, _ := catalog.OnDemandPrice(region, name)
			family, tenancy := "Compute Instance", "Shared"
			if strings.Contains(name, ".metal") {
				family, tenancy = "Compute Instance (bare metal)", "Dedicated"
			}
			h := fnv.New64a()
			_, _ = h.Write([]byte(region + "/" + name))
			out = append(out, pricingProduct{family: family, price: price, sku: strings.ToUpper(strconv.FormatUint(h.Sum64(), 36)),
				attributes: map[string]string{
					"servicecode": "AmazonEC2", "servicename": "Amazon Elastic Compute Cloud",
					"regionCode": region, "location": location, "locationType": "AWS Region",
					"instanceType": name, "instanceFamily": family, "operatingSystem": "Linux",
					"tenancy": tenancy, "preInstalledSw": "NA", "capacitystatus": "Used",
					"licenseModel": "No License required", "marketoption": "OnDemand",
					"usagetype": region + "-BoxUsage:" + name, "operation": "RunInstances",
				}})
		}
	}
	return out
})

// pricingFilter is one of GetProducts' filters.
type pricingFilter struct {
	Type  string
	Field string
	Value string
}

// matches reports whether the product passes f. A field the product does not have matches
// nothing, as in the real API; field names are matched without regard to case.
func (p pricingProduct) matches(f pricingFilter) bool {
	var have string
	found := false
	if strings.EqualFold(f.Field, "productFamily") {
		have, found = p.family, true
	} else {
		for k, v := range p.attributes {
			if strings.EqualFold(k, f.Field) {
				have, found = v, true
				break
			}
		}
	}
	if !found {
		return false
	}
	switch f.Type {
	case "TERM_MATCH", "EQUALS":
		return strings.EqualFold(have, f.Value)
	case "CONTAINS":
		return strings.Contains(strings.ToLower(have), strings.ToLower(f.Value))
	case "ANY_OF", "NONE_OF":
		in := slices.ContainsFunc(strings.Split(f.Value, ","), func(v string) bool { return strings.EqualFold(strings.TrimSpace(v), have) })
		return in == (f.Type == "ANY_OF")
	}
	return false
}

// priceListJSON renders the product as the price list's aws_v1 format does.
func (p pricingProduct) priceListJSON() string {
	const offerTerm, rateCode = "JRTCKXETXF", "6YS6EN2CT7"
	usd := strconv.FormatFloat(p.price, 'f', 10, 64)
	doc := map[string]any{
		"product":     map[string]any{"productFamily": p.family, "attributes": p.attributes, "sku": p.sku},
		"serviceCode": "AmazonEC2",
		"terms": map[string]any{"OnDemand": map[string]any{
			p.sku + "." + offerTerm: map[string]any{
				"sku": p.sku, "offerTermCode": offerTerm, "effectiveDate": "2025-05-01T00:00:00Z", "termAttributes": map[string]any{},
				"priceDimensions": map[string]any{
					p.sku + "." + offerTerm + "." + rateCode: map[string]any{
						"rateCode": p.sku + "." + offerTerm + "." + rateCode, "unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": []string{},
						"description":  fmt.Sprintf("$%s per On Demand Linux %s Instance Hour", strconv.FormatFloat(p.price, 'f', -1, 64), p.attributes["instanceType"]),
						"pricePerUnit": map[string]string{"USD": usd},
					}},
			}}},
		"version":         "20250528000000",
		"publicationDate": "2025-05-28T00:00:00Z",
	}
	buf, _ := json.Marshal(doc)
	return string(buf)
}

// maxPricingResults is the most GetProducts returns at once (its MaxResults' bound).
const maxPricingResults = 100

func pricingError(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Emulator) servePricing(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AWSPriceListService.")
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil || len(body) > maxBodyBytes {
		writePricingError(w, pricingError(400, "SerializationException", "reading body: request body missing or over %d bytes", maxBodyBytes))
		return
	}
	if e.throttled("pricing", op) {
		e.record(Call{Service: "pricing", Action: op, ErrorCode: "ThrottlingException", Throttled: true})
		writePricingError(w, pricingError(400, "ThrottlingException", "Rate exceeded"))
		return
	}
	var out any
	switch op {
	case "GetProducts":
		out, err = e.getProducts(body)
	default:
		err = pricingError(400, "UnknownOperationException", "unknown operation %q", op)
	}
	e.record(Call{Service: "pricing", Action: op, ErrorCode: errorCode(err)})
	if err != nil {
		writePricingError(w, err)
		return
	}
	buf, err := json.Marshal(out)
	if err != nil {
		writePricingError(w, pricingError(500, "InternalErrorException", "encoding response"))
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_, _ = w.Write(buf)
}

// getProducts answers GetProducts: the products of ServiceCode that pass every filter, in pages
// of MaxResults (default and at most 100).
func (e *Emulator) getProducts(body []byte) (any, error) {
	var in struct {
		ServiceCode   string
		Filters       []pricingFilter
		FormatVersion string
		MaxResults    *int
		NextToken     string
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, pricingError(400, "SerializationException", "decoding request body: %v", err)
	}
	if in.FormatVersion != "" && in.FormatVersion != "aws_v1" {
		return nil, pricingError(400, "InvalidParameterException", "Invalid FormatVersion %q: only aws_v1 is supported", in.FormatVersion)
	}
	for _, f := range in.Filters {
		switch f.Type {
		case "TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF":
		default:
			return nil, pricingError(400, "InvalidParameterException", "Invalid filter type %q", f.Type)
		}
		if f.Field == "" {
			return nil, pricingError(400, "InvalidParameterException", "A filter needs a field")
		}
	}
	size := maxPricingResults
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > maxPricingResults {
			return nil, pricingError(400, "InvalidParameterException", "MaxResults must be between 1 and %d, got %d", maxPricingResults, *in.MaxResults)
		}
		size = *in.MaxResults
	}
	start := 0
	if in.NextToken != "" {
		n, ok := decodeToken(in.NextToken)
		if !ok {
			return nil, pricingError(400, "InvalidNextTokenException", "The NextToken is invalid.")
		}
		start = n
	}
	var matched []pricingProduct
	if in.ServiceCode == "AmazonEC2" {
		for _, p := range pricingProducts() {
			if !slices.ContainsFunc(in.Filters, func(f pricingFilter) bool { return !p.matches(f) }) {
				matched = append(matched, p)
			}
		}
	}
	from, to, next := page{start: start, size: size}.cut(len(matched))
	list := make([]string, 0, to-from)
	for _, p := range matched[from:to] {
		list = append(list, p.priceListJSON())
	}
	out := map[string]any{"FormatVersion": "aws_v1", "PriceList": list}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}

func writePricingError(w http.ResponseWriter, err error) {
	ae := &apiError{Status: 500, Code: "InternalErrorException", Message: err.Error()}
	errors.As(err, &ae)
	buf, _ := json.Marshal(map[string]string{"__type": ae.Code, "message": ae.Message})
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(ae.Status)
	_, _ = w.Write(buf)
}
