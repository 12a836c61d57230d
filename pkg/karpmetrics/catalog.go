package karpmetrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Catalog serves the AWS provider's gauges of the instance types it can launch:
// karpenter_cloudprovider_instance_type_{cpu_cores, memory_bytes}{instance_type} and
// karpenter_cloudprovider_instance_type_offering_{available, price_estimate}{instance_type,
// capacity_type, zone}. Each Observe replaces the whole snapshot (a type the catalog dropped
// has no series left).
type Catalog struct {
	snapshot
	cpu, memory, available, price *prometheus.Desc
}

// CatalogType is one instance type as the catalog describes it.
type CatalogType struct {
	Name      string
	VCPU      int32 // the type's default vCPUs
	MemoryMiB int64 // as EC2 reports it, before any overhead is taken off
	Offerings []CatalogOffering
}

// CatalogOffering is one place and purchase option of a type.
type CatalogOffering struct {
	Zone, CapacityType string // capacity type as the label spells it: on-demand, spot
	PriceUSDPerHour    float64
	Available          bool
}

// NewCatalog makes the collector; register it on the service's registry.
func NewCatalog() *Catalog {
	offering := []string{LabelInstanceType, LabelCapacityType, LabelZone}
	c := &Catalog{
		cpu: prometheus.NewDesc("karpenter_cloudprovider_instance_type_cpu_cores", "VCPUs cores for a given instance type.",
			[]string{LabelInstanceType}, nil),
		memory: prometheus.NewDesc("karpenter_cloudprovider_instance_type_memory_bytes", "Memory, in bytes, for a given instance type.",
			[]string{LabelInstanceType}, nil),
		available: prometheus.NewDesc("karpenter_cloudprovider_instance_type_offering_available",
			"Instance type offering availability, based on instance type, capacity type, and zone", offering, nil),
		price: prometheus.NewDesc("karpenter_cloudprovider_instance_type_offering_price_estimate",
			"Instance type offering estimated hourly price used when making informed decisions on node cost calculation, based on instance type, capacity type, and zone.",
			offering, nil),
	}
	c.descs = []*prometheus.Desc{c.cpu, c.memory, c.available, c.price}
	return c
}

// Observe replaces the snapshot with the catalog's types. An offering listed twice (one zone
// and capacity type) is available if either says so, as Karpenter merges them.
func (c *Catalog) Observe(types []CatalogType) {
	var g gauges
	for _, t := range types {
		g.set(c.cpu, float64(t.VCPU), t.Name)
		g.set(c.memory, float64(t.MemoryMiB)*1024*1024, t.Name)
		type key struct{ zone, ct string }
		seen := map[key]int{} // index of the offering's available sample
		for _, o := range t.Offerings {
			k := key{o.Zone, o.CapacityType}
			if i, dup := seen[k]; dup {
				if o.Available {
					g[i] = prometheus.MustNewConstMetric(c.available, prometheus.GaugeValue, 1, t.Name, o.CapacityType, o.Zone)
				}
				continue
			}
			seen[k] = len(g)
			g.set(c.available, boolValue(o.Available), t.Name, o.CapacityType, o.Zone)
			g.set(c.price, o.PriceUSDPerHour, t.Name, o.CapacityType, o.Zone)
		}
	}
	c.replace(g)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
