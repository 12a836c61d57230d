package catalog

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/csv"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"
)

// The per-region price table: ec2instances.info's Linux prices of 2025-05-28 (see
// data/PROVENANCE.md), written by tools/pricegen. Regenerate with:
//
//go:generate go run ../../tools/pricegen -out data

//go:embed data/prices.csv.gz
var pricesCSVGz []byte

//go:embed data/regions.csv
var regionsCSV []byte

// PriceTableSource names where the per-region table comes from, for a catalog's Source.
const PriceTableSource = "ec2instances.info Linux prices of 2025-05-28 (github.com/cristim/ec2-instances-info v0.0.0-20250528091325-32acf84f42eb)"

// priceHome is the region whose on-demand prices the type table (instance-types.json) carries.
const priceHome = "us-east-1"

// regionalPrice is one row of the table; a zero is a price the source lacks.
type regionalPrice struct {
	onDemand, spotMin, spotMax float64
}

type priceTable struct {
	byRegion  map[string]map[string]regionalPrice // region → type → prices
	locations map[string]string                   // region → the Pricing API's location
	regions   []string
}

var loadPrices = sync.OnceValues(func() (*priceTable, error) {
	zr, err := gzip.NewReader(bytes.NewReader(pricesCSVGz))
	if err != nil {
		return nil, fmt.Errorf("opening embedded prices: %w", err)
	}
	rows, err := csv.NewReader(zr).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("decoding embedded prices: %w", err)
	}
	t := &priceTable{byRegion: map[string]map[string]regionalPrice{}, locations: map[string]string{}}
	for i, row := range rows {
		if i == 0 {
			continue // header
		}
		if len(row) != 5 {
			return nil, fmt.Errorf("embedded prices, row %d: %d fields, want 5", i+1, len(row))
		}
		var p regionalPrice
		for j, dst := range []*float64{&p.onDemand, &p.spotMin, &p.spotMax} {
			if row[2+j] == "" {
				continue
			}
			if *dst, err = strconv.ParseFloat(row[2+j], 64); err != nil {
				return nil, fmt.Errorf("embedded prices, row %d: %w", i+1, err)
			}
		}
		if t.byRegion[row[1]] == nil {
			t.byRegion[row[1]] = map[string]regionalPrice{}
		}
		t.byRegion[row[1]][row[0]] = p
	}
	locs, err := csv.NewReader(bytes.NewReader(regionsCSV)).ReadAll()
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("decoding embedded regions: %w", err)
	}
	for _, row := range locs[1:] {
		t.locations[row[0]] = row[1]
	}
	for r := range t.byRegion {
		t.regions = append(t.regions, r)
	}
	sort.Strings(t.regions)
	return t, nil
})

func prices() *priceTable {
	t, err := loadPrices()
	if err != nil {
		panic(err) // embedded at build time and covered by tests: a broken build
	}
	return t
}

// OnDemandPrice is the embedded Linux on-demand price (USD/h) of a type in a region. In
// us-east-1 the type table's price (Karpenter's generated table, the newer source) comes first
// and the per-region table fills the types it lacks; elsewhere only the per-region table
// answers.
func OnDemandPrice(region, name string) (float64, bool) {
	if region == priceHome {
		if t, ok := Lookup(name); ok && t.OnDemandPriceUSDPerHour > 0 {
			return t.OnDemandPriceUSDPerHour, true
		}
	}
	p := prices().byRegion[region][name]
	return p.onDemand, p.onDemand > 0
}

// SpotPriceRange is the lowest and highest Linux spot price (USD/h) the per-region table saw
// for a type across a region's zones, when it has them.
func SpotPriceRange(region, name string) (lo, hi float64, ok bool) {
	p := prices().byRegion[region][name]
	if p.spotMin <= 0 {
		return 0, 0, false
	}
	return p.spotMin, max(p.spotMax, p.spotMin), true
}

// PriceRegions lists the regions the per-region table prices, sorted.
func PriceRegions() []string { return append([]string(nil), prices().regions...) }

// PricedTypes lists the types with an on-demand price in a region (OnDemandPrice's), sorted.
func PricedTypes(region string) []string {
	seen := map[string]bool{}
	for name, p := range prices().byRegion[region] {
		if p.onDemand > 0 {
			seen[name] = true
		}
	}
	if region == priceHome {
		for _, t := range All() {
			if t.OnDemandPriceUSDPerHour > 0 {
				seen[t.Name] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Location is the Pricing API's name of a region ("Europe (Ireland)" for eu-west-1).
func Location(region string) (string, bool) {
	l, ok := prices().locations[region]
	return l, ok
}

// SpotPriceStep is how long a modelled spot price holds before the model moves it.
const SpotPriceStep = time.Hour

// RegionalSpotPriceModel documents how ModelledSpotPrice invents a spot price. It is a model,
// not data.
const RegionalSpotPriceModel = "modelled: within the region's real spot range (ec2instances.info, 2025-05-28), " +
	"spotMin + (spotMax − spotMin) × h(type, zone, hour); a type without a range: its on-demand price in " +
	"the region × (0.30 + 0.40 × h(type, zone, hour)); h a stable hash in [0,1)"

// ModelledSpotPrice is a Linux spot price (USD/h) for a type in a zone of a region during the
// step-th SpotPriceStep (Unix time / SpotPriceStep): a deterministic point within the region's
// real spot range, or 30–70% of its on-demand price where the table has no range; false when
// the region prices the type neither way. See RegionalSpotPriceModel.
func ModelledSpotPrice(region, name, zone string, step int64) (float64, bool) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(zone))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(strconv.FormatInt(step, 10)))
	frac := float64(h.Sum64()%10000) / 10000
	if lo, hi, ok := SpotPriceRange(region, name); ok {
		return math.Round((lo+(hi-lo)*frac)*1e6) / 1e6, true
	}
	od, ok := OnDemandPrice(region, name)
	if !ok {
		return 0, false
	}
	return math.Round(od*(0.30+0.40*frac)*1e6) / 1e6, true
}
