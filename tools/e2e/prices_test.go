package e2e_test

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// pricedPool is a pool of two types alike in shape (2 vCPU, 4 GiB, amd64) whose on-demand
// prices rank one way in us-east-1 and the other in eu-west-1.
const pricedPool = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiFamily: AL2023
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo-cluster
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo-cluster
  role: KarpenterNodeRole-demo-cluster
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: priced
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: ["c6id.large", "c7a.large"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
        - key: topology.kubernetes.io/zone
          operator: In
          values: ["eu-west-1a"]
`

// A stack in eu-west-1 decides by eu-west-1's prices: c6id.large is the cheaper of the pool's two
// types on demand in us-east-1 ($0.1008 < $0.10264/h) and c7a.large in eu-west-1 ($0.11012 <
// $0.11445/h), so the scheduler ranks c7a.large first for a pod either fits, it lands on
// c7a.large, and the claim is priced at eu-west-1's $0.11012/h, which the launcher had from the
// Pricing API.
func TestDecisionsUseTheRegionsPrices(t *testing.T) {
	t.Parallel()
	s := e2e.NewStackWith(t, e2e.Options{Region: "eu-west-1"})
	cheap, dear := s.OnDemandPrice("c7a.large"), s.OnDemandPrice("c6id.large")
	require.Less(t, cheap, dear, "the data this test relies on: c7a.large is eu-west-1's cheaper")

	applyYAML(t, s, pricedPool)
	deployment(t, s, "priced", 1, "500m", "", "")
	podsRunning(t, s, "app=priced", 1, 90*time.Second)
	nodes := launchedNodes(t, s)
	require.Len(t, nodes, 1)
	assert.Equal(t, "c7a.large", nodes[0].Labels[corev1.LabelInstanceTypeStable], "eu-west-1's cheaper type, not us-east-1's")
	assert.Equal(t, "eu-west-1a", nodes[0].Labels[corev1.LabelTopologyZone])
	assert.Equal(t, "on-demand", nodes[0].Labels[karpv1.CapacityTypeLabelKey])

	// The scheduler ranked the claim's types by eu-west-1's prices (cheapest first), and the
	// launcher's price of the claim is eu-west-1's, from the Pricing API.
	claims := s.NodeClaims(t)
	require.Len(t, claims, 1)
	var ranked []string
	for _, r := range claims[0].Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable {
			ranked = r.Values
		}
	}
	assert.Equal(t, []string{"c7a.large", "c6id.large"}, ranked, "the scheduler's choice, cheapest first by eu-west-1's prices")
	series := regexp.MustCompile(fmt.Sprintf(`fleetwright_nodeclaim_price_usd_per_hour\{[^}]*nodeclaim="%s"[^}]*\} (\S+)`, regexp.QuoteMeta(claims[0].Name)))
	var price float64
	require.Eventually(t, func() bool {
		m := series.FindStringSubmatch(scrape(t, s, "launcher"))
		if m == nil {
			return false
		}
		price, _ = strconv.ParseFloat(m[1], 64)
		return true
	}, 45*time.Second, 500*time.Millisecond, "the launcher reports the claim's price")
	assert.InDelta(t, cheap, price, 1e-9, "the claim's price is eu-west-1's on-demand price of c7a.large")
	metrics := scrape(t, s, "launcher")
	assert.Regexp(t, `fleetwright_launcher_catalog_types_priced\{source="pricing-api"\} [1-9]`, metrics)
	assert.Regexp(t, `fleetwright_launcher_catalog_types_unpriced [1-9]`, metrics, "the emulator offers types eu-west-1 does not price")

	log := s.Service("launcher").Log()
	assert.Contains(t, log, "AWS Pricing API GetProducts", "the catalog's source names the Pricing API")
	assert.Contains(t, log, "instance types left out of the catalog: no on-demand price", "unpriced types are reported, not dropped silently")
	assert.Positive(t, s.Calls(t, "GetProducts"))
}
