package main

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// tagForClaim tags an instance for a NodeClaim, as the launcher does.
func tagForClaim(claim string) ec2types.Tag {
	return ec2types.Tag{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String(claim)}
}

// bareClaim creates a NodeClaim with no status: made by the scheduler, not yet launched.
func (e *env) bareClaim(name string) {
	e.t.Helper()
	nc := &karpv1.NodeClaim{TypeMeta: metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}}}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nc)
	require.NoError(e.t, err)
	res := e.dyn.Resource(clusterstate.NodeClaims)
	_, err = res.Create(e.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { e.remove(res, name) })
}

// gauge reads a metric's value from the terminator's /metrics (-1 if absent).
func (e *env) gauge(name string) float64 {
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(e.metrics())
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// Issue 31, items 1 and 2: the orphan collector follows Karpenter's garbage collection. An
// instance with a registered Node is never ended, claim or no claim (a Karpenter v0.2x node
// whose adoption is under way, or any node whose pods would go with it undrained). A second
// instance tagged for a claim that records another one is ended (a redelivered intent launched
// twice while EC2's DescribeInstances did not yet show the first), as is one whose Node never
// registered with a claim; an instance tagged for a claim not yet launched is the launcher's to
// adopt, and is kept.
func TestOrphanCollectorSparesNodesAndEndsSecondLaunches(t *testing.T) {
	e := newEnv(t, 131)
	legacy := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand, tagForClaim("legacy-a"))
	e.node(legacy) // registered: no karpenter.sh/unregistered taint
	first := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand, tagForClaim("twice"))
	e.claim("twice", first, "")
	second := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand, tagForClaim("twice"))
	e.node(second, func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{karpv1.UnregisteredNoExecuteTaint} })
	inflight := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand, tagForClaim("in-flight"))
	e.bareClaim("in-flight")
	gone := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand, tagForClaim("gone"))
	e.node(gone, func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{karpv1.UnregisteredNoExecuteTaint} })
	e.run("--gc-interval", "200ms", "--gc-grace", "1m")

	running := func(id string) bool { s := e.instance(id).State; return s == "running" || s == "pending" }
	// The gauge is set at the end of a pass: once it says one instance was kept for its Node,
	// a whole pass has judged every instance.
	require.Eventually(t, func() bool {
		return !running(second.ID) && !running(gone.ID) && e.gauge("fleetwright_terminator_orphans_kept") == 1
	},
		wait, tick, "the second launch and the never-registered orphan are terminated, and a pass is over")
	assert.True(t, running(legacy.ID), "an instance with a registered Node is never terminated by the collector")
	assert.True(t, running(first.ID), "the instance the claim records keeps running")
	assert.True(t, running(inflight.ID), "the instance of a claim not yet launched is left to the launcher")
}

// listThen is the EC2 API with something done while DescribeInstances is under way, before
// EC2 answers: what another service does between the collector's reads.
type listThen struct {
	EC2API
	during func()
}

func (l *listThen) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	if l.during != nil {
		l.during()
		l.during = nil
	}
	return l.EC2API.DescribeInstances(ctx, in, opts...)
}

// Issue 31, item 1: the collector lists the instances first and reads the claims after, as
// Karpenter's does. An instance whose claim records it while the list is under way (the
// launcher adopting an old instance, a claim made for a node being adopted) is not taken for
// an orphan.
func TestOrphanCollectorReadsClaimsAfterListingInstances(t *testing.T) {
	e := newEnv(t, 132)
	inst := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand, tagForClaim("recorded-meanwhile"))
	cache, err := clusterstate.New(e.kube, e.dyn, clusterstate.Want{Nodes: true, NodeClaims: true}, zerolog.Nop())
	require.NoError(t, err)
	require.NoError(t, cache.Start(e.ctx))
	require.Eventually(t, func() bool { return cache.Ready(e.ctx) == nil }, wait, tick)
	api := &listThen{EC2API: e.ec2, during: func() {
		e.claim("recorded-meanwhile", inst, "")
		require.Eventually(t, func() bool { nc, ok := cache.Claim("recorded-meanwhile"); return ok && nc.Status.ProviderID != "" }, wait, tick)
	}}
	gc := &orphans{ec2: api, cache: cache, cluster: "demo-cluster", grace: time.Minute, log: zerolog.Nop(),
		metrics: newMetrics(prometheus.NewRegistry()), now: time.Now}
	require.NoError(t, gc.collect(e.ctx))
	assert.Equal(t, "running", e.instance(inst.ID).State, "the instance its claim recorded during the list is kept")
}
