package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/catalogkv"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
	"github.com/fleetwright/fleetwright/tools/awsemu"
	emuclient "github.com/fleetwright/fleetwright/tools/awsemu/client"
	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/localcluster/clustertest"
)

func TestMain(m *testing.M) { clustertest.Main(m) }

// env is one launcher under test with everything it talks to.
type env struct {
	t       *testing.T
	ctx     context.Context
	kube    client.Client
	emu     *emuclient.Client
	js      jetstream.JetStream
	nc      *nats.Conn
	results jetstream.Consumer
}

// start starts the launcher against the shared control plane, an emulator whose instances
// register their Nodes, and a NATS server of its own.
func start(t *testing.T, extra ...string) *env { return startWith(t, nil, extra...) }

// startWith is start with a change to the emulator before the launcher runs (a fault from its
// first call on).
func startWith(t *testing.T, before func(*awsemu.Emulator), extra ...string) *env {
	t.Helper()
	return startEmulated(t, nil, before, extra...)
}

// startEmulated is startWith with the emulator's configuration changed first (what its EKS
// cluster reports, say).
func startEmulated(t *testing.T, configure func(*awsemu.Config), before func(*awsemu.Emulator), extra ...string) *env {
	t.Helper()
	c := e2e.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)

	// Tests share the control plane: a fixed seed of their own (from the test's name) keeps
	// instance ids and node names from matching the nodes an earlier test left behind, and a
	// failure reproduces with the same ids.
	seed := fnv.New64a()
	_, _ = seed.Write([]byte(t.Name()))
	cfg := awsemu.Config{ClusterName: "demo-cluster", BootDelay: time.Millisecond, Seed: int64(seed.Sum64() >> 1)}
	reg, err := awsemu.NewRegistrarFromKubeconfig(c.Kubeconfig)
	require.NoError(t, err)
	go reg.Run(ctx)
	cfg.Registrar = reg
	if configure != nil {
		configure(&cfg)
	}
	emu, err := awsemu.New(cfg)
	require.NoError(t, err)
	if before != nil {
		before(emu)
	}
	go emu.Run(ctx)
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_EC2": srv.URL, "AWS_ENDPOINT_URL_IAM": srv.URL, "AWS_ENDPOINT_URL_PRICING": srv.URL, "AWS_ENDPOINT_URL_SSM": srv.URL, "AWS_ENDPOINT_URL_EKS": srv.URL, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	_, err = e2e.Kubectl(c, "apply", "-f", filepath.Join(e2e.Root(t), "deploy", "examples", "v1", "default.yaml"))
	require.NoError(t, err)

	nsrv := bustest.RunServer(t)
	done := make(chan error, 1)
	lctx, stop := context.WithCancel(ctx)
	go func() {
		args := []string{"--nats-url", nsrv.ClientURL(), "--kubeconfig", c.Kubeconfig, "--admin-addr", "127.0.0.1:0",
			"--cluster-name", "demo-cluster", "--unavailable-ttl", "3m"}
		done <- run(lctx, append(args, extra...))
	}()
	t.Cleanup(func() {
		stop()
		// A stop before the caches synced ends run with context.Canceled, which service.Main
		// takes for a clean stop too.
		if err := <-done; !errors.Is(err, context.Canceled) {
			assert.NoError(t, err)
		}
	})

	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, karpv1.AddToScheme(scheme))
	require.NoError(t, ec2v1.AddToScheme(scheme))
	rc, err := c.RESTConfig()
	require.NoError(t, err)
	kube, err := client.New(rc, client.Options{Scheme: scheme})
	require.NoError(t, err)
	// Leave the shared control plane without this test's nodes and claims: the next test's
	// emulator numbers its instances' addresses (and so node names) from the start again. No
	// terminator runs here, so the test releases the termination finalizer itself.
	t.Cleanup(func() {
		_ = kube.DeleteAllOf(context.Background(), &karpv1.NodeClaim{})
		var nodes corev1.NodeList
		_ = kube.List(context.Background(), &nodes)
		for i := range nodes.Items {
			_ = kube.Patch(context.Background(), &nodes.Items[i], client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		}
		_ = kube.DeleteAllOf(context.Background(), &corev1.Node{})
	})

	nc, err := nats.Connect(nsrv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	e := &env{t: t, ctx: ctx, kube: kube, emu: emuclient.New(srv.URL), js: js, nc: nc}
	require.Eventually(t, func() bool {
		e.results, err = js.CreateOrUpdateConsumer(ctx, "FLEETWRIGHT_LAUNCH", jetstream.ConsumerConfig{
			Durable: "test-results", FilterSubject: "fleetwright.launch.results", AckPolicy: jetstream.AckExplicitPolicy})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the launcher ensures its streams")
	return e
}

// claim creates a NodeClaim the way the scheduler does and returns its intent.
func (e *env) claim(name string, types ...string) *launchv1.LaunchIntent {
	return e.claimOf("default", name, types...)
}

// launch is claimOf with the intent published, its claim's name its dedup id.
func (e *env) launch(class, name string, types ...string) *launchv1.LaunchIntent {
	intent := e.claimOf(class, name, types...)
	e.publish(intent, name)
	return intent
}

// claimOf is claim for the node class of another name.
func (e *env) claimOf(class, name string, types ...string) *launchv1.LaunchIntent {
	e.t.Helper()
	return e.claimLabelled(class, name, nil, types...)
}

// claimLabelled is claimOf with labels set over the usual ones from the claim's creation on, as
// the scheduler writes a claim: a label patched in later may reach the launcher's cache after
// the intent does.
func (e *env) claimLabelled(class, name string, labels map[string]string, types ...string) *launchv1.LaunchIntent {
	e.t.Helper()
	all := map[string]string{karpv1.NodePoolLabelKey: "default", "team": "a"}
	maps.Copy(all, labels)
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: all,
			Annotations: map[string]string{"example.com/owner": "team-a",
				// The scheduler's record of a pod nominated to the claim.
				podproj.NominationKey("pod-uid-1"): `{"pod":"default/p1","at":"2026-11-26T00:00:00Z"}`}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: class},
			// As the scheduler writes them: the launcher launches what the claim allows.
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: types},
				{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}},
				{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}}},
			StartupTaints: []corev1.Taint{{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	require.NoError(e.t, e.kube.Create(e.ctx, nc))
	intent := &launchv1.LaunchIntent{
		NodeClaimName: name, NodeClaimUid: string(nc.UID), NodePoolName: "default",
		NodeClassRef:  &commonv1.ObjectRef{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: class},
		Zones:         []string{"us-east-1a"},
		CapacityTypes: []commonv1.CapacityType{commonv1.CapacityType_CAPACITY_TYPE_SPOT, commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND},
		Labels:        map[string]string{"team": all["team"]},
		StartupTaints: []*commonv1.Taint{{Key: "example.com/agent-not-ready", Effect: "NoSchedule"}},
	}
	for _, name := range types {
		it, ok := catalog.Lookup(name)
		require.True(e.t, ok)
		intent.InstanceTypes = append(intent.InstanceTypes, &launchv1.InstanceTypeOption{Name: name, Offerings: []*catalogv1.Offering{
			{Zone: "us-east-1a", CapacityType: commonv1.CapacityType_CAPACITY_TYPE_SPOT, PriceUsdPerHour: catalog.SpotPrice(it, "us-east-1a"), Available: true},
			{Zone: "us-east-1a", CapacityType: commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND, PriceUsdPerHour: it.OnDemandPriceUSDPerHour, Available: true},
		}})
	}
	return intent
}

// dump logs the claims and nodes, for a failing test.
func (e *env) dump() {
	var claims karpv1.NodeClaimList
	_ = e.kube.List(e.ctx, &claims)
	for _, c := range claims.Items {
		e.t.Logf("nodeclaim %s labels=%v status=%+v", c.Name, c.Labels, c.Status)
	}
	var nodes corev1.NodeList
	_ = e.kube.List(e.ctx, &nodes)
	for _, n := range nodes.Items {
		e.t.Logf("node %s providerID=%s labels=%v taints=%v conditions=%v", n.Name, n.Spec.ProviderID, n.Labels, n.Spec.Taints, n.Status.Conditions)
	}
}

func (e *env) publish(intent *launchv1.LaunchIntent, msgID string) {
	e.t.Helper()
	b, err := proto.Marshal(intent)
	require.NoError(e.t, err)
	msg := nats.NewMsg("fleetwright.launch.intents")
	msg.Data = b
	msg.Header.Set("Nats-Msg-Id", msgID)
	msg.Header.Set("Fw-Type", string(intent.ProtoReflect().Descriptor().FullName()))
	_, err = e.js.PublishMsg(e.ctx, msg)
	require.NoError(e.t, err)
}

func (e *env) nodeClaim(name string) *karpv1.NodeClaim {
	var nc karpv1.NodeClaim
	if err := e.kube.Get(e.ctx, client.ObjectKey{Name: name}, &nc); err != nil {
		return nil
	}
	return &nc
}

// claimWhen waits up to within for the NodeClaim to exist and be as cond wants, and returns
// it; if it is not, it logs the claims and nodes and fails the test.
func (e *env) claimWhen(name string, within time.Duration, cond func(*karpv1.NodeClaim) bool, msg string) *karpv1.NodeClaim {
	e.t.Helper()
	var nc *karpv1.NodeClaim
	if !assert.Eventually(e.t, func() bool { nc = e.nodeClaim(name); return nc != nil && cond(nc) }, within, 50*time.Millisecond, "%s: %s", name, msg) {
		e.dump()
		e.t.FailNow()
	}
	return nc
}

func hasInstance(nc *karpv1.NodeClaim) bool   { return nc.Status.ProviderID != "" }
func isRegistered(nc *karpv1.NodeClaim) bool  { return nc.IsTrue(karpv1.ConditionTypeRegistered) }
func isInitialized(nc *karpv1.NodeClaim) bool { return nc.IsTrue(karpv1.ConditionTypeInitialized) }

// node reads the claim's Node.
func (e *env) node(nc *karpv1.NodeClaim) *corev1.Node {
	e.t.Helper()
	var node corev1.Node
	require.NoError(e.t, e.kube.Get(e.ctx, client.ObjectKey{Name: nc.Status.NodeName}, &node))
	return &node
}

// agentReady removes the claim's startup taint from its node, as the agent that owns it does
// once it is ready; the taint must be there still, left for the agent.
func (e *env) agentReady(nc *karpv1.NodeClaim) {
	e.t.Helper()
	node := e.node(nc)
	agent := func(t corev1.Taint) bool { return t.Key == "example.com/agent-not-ready" }
	require.True(e.t, slices.ContainsFunc(node.Spec.Taints, agent), "the startup taint is left for its agent")
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, agent)
	require.NoError(e.t, e.kube.Update(e.ctx, node), "the agent removes its taint")
}

func (e *env) instancesFor(claim string) []awsemu.InstanceInfo {
	all, err := e.emu.Instances(e.ctx)
	require.NoError(e.t, err)
	var out []awsemu.InstanceInfo
	for _, i := range all {
		for _, tag := range i.Tags {
			if tag.Key == "karpenter.sh/nodeclaim" && tag.Value == claim {
				out = append(out, i)
			}
		}
	}
	return out
}

// templateID is the launch template of the claim's one instance.
func (e *env) templateID(claim string) string {
	e.t.Helper()
	insts := e.instancesFor(claim)
	require.Len(e.t, insts, 1, claim)
	for _, tag := range insts[0].Tags {
		if tag.Key == "aws:ec2launchtemplate:id" {
			return tag.Value
		}
	}
	e.t.Fatalf("instance %s of %s names no launch template", insts[0].ID, claim)
	return ""
}

// template is the launch template of the claim's one instance, as the emulator holds it.
func (e *env) template(claim string) awsemu.LaunchTemplateInfo {
	e.t.Helper()
	id := e.templateID(claim)
	lts, err := e.emu.LaunchTemplates(e.ctx)
	require.NoError(e.t, err)
	i := slices.IndexFunc(lts, func(lt awsemu.LaunchTemplateInfo) bool { return lt.ID == id })
	require.GreaterOrEqual(e.t, i, 0, "the template %s of %s", id, claim)
	return lts[i]
}

// countCalls is how many of the calls the emulator was made are as match wants.
func (e *env) countCalls(match func(awsemu.Call) bool) int {
	e.t.Helper()
	calls, err := e.emu.Calls(e.ctx)
	require.NoError(e.t, err)
	n := 0
	for _, c := range calls {
		if match(c) {
			n++
		}
	}
	return n
}

func (e *env) createFleetCalls() int {
	return e.countCalls(func(c awsemu.Call) bool { return c.Action == "CreateFleet" })
}

func (e *env) nextResult() *launchv1.LaunchResult {
	e.t.Helper()
	msg, err := e.results.Next(jetstream.FetchMaxWait(30 * time.Second))
	require.NoError(e.t, err, "a launch result is published")
	require.NoError(e.t, msg.Ack())
	var r launchv1.LaunchResult
	require.NoError(e.t, proto.Unmarshal(msg.Data(), &r))
	return &r
}

// nextFailure is the next launch result, which fails the claim with the code and a message
// that contains msg.
func (e *env) nextFailure(code, msg string) *launchv1.LaunchResult {
	e.t.Helper()
	r := e.nextResult()
	assert.Equal(e.t, launchv1.LaunchOutcome_LAUNCH_OUTCOME_FAILED, r.Outcome)
	assert.Equal(e.t, code, r.ErrorCode)
	assert.Contains(e.t, r.ErrorMessage, msg)
	return r
}

// An intent becomes exactly one instance, recorded on the NodeClaim; its node registers with
// the pool's labels and taints, is linked, and is initialized once its startup taint is gone —
// removed by the agent that owns it, never by Fleetwright.
func TestLaunchRegisterInitialize(t *testing.T) {
	e := start(t)
	intent := e.launch("default", "default-launch1", "t4g.small", "t4g.medium")
	nc := e.claimWhen("default-launch1", 90*time.Second, isRegistered, "launched and registered")
	require.Never(t, func() bool { return isInitialized(e.nodeClaim("default-launch1")) }, 3*time.Second, 100*time.Millisecond,
		"not initialized while the startup taint is on the node")
	e.agentReady(nc)
	nc = e.claimWhen("default-launch1", 90*time.Second, isInitialized, "launched, registered and initialized")
	assert.Regexp(t, `^aws:///us-east-1a/i-[0-9a-f]+$`, nc.Status.ProviderID)
	assert.Equal(t, "t4g.small", nc.Labels[karpv1.LabelInstanceType], "the cheapest type")
	assert.Equal(t, "spot", nc.Labels[karpv1.CapacityTypeLabelKey], "spot is preferred when allowed")
	assert.NotEmpty(t, nc.Status.ImageID)
	require.NotEmpty(t, nc.Status.NodeName)

	node := e.node(nc)
	assert.Equal(t, "default", node.Labels[karpv1.NodePoolLabelKey])
	assert.Equal(t, "spot", node.Labels[karpv1.CapacityTypeLabelKey])
	assert.Equal(t, "a", node.Labels["team"], "the pool's labels come through user data")
	assert.Equal(t, "team-a", node.Annotations["example.com/owner"], "the claim's annotations (the pool template's) reach the node")
	assert.NotContains(t, node.Annotations, podproj.NominationKey("pod-uid-1"), "the claim's nominations stay on the claim")
	assert.Equal(t, "arm64", node.Labels[karpv1.LabelArch])
	assert.Equal(t, "true", node.Labels["karpenter.sh/initialized"])
	// Karpenter's well-known labels of the offering, whatever the pods asked for.
	for k, v := range map[string]string{"karpenter.k8s.aws/instance-category": "t", "karpenter.k8s.aws/instance-family": "t4g",
		"karpenter.k8s.aws/instance-generation": "4", "karpenter.k8s.aws/instance-size": "small", "karpenter.k8s.aws/instance-cpu": "2",
		"karpenter.k8s.aws/instance-memory": "2048", "karpenter.k8s.aws/instance-hypervisor": "nitro", "topology.k8s.aws/zone-id": "use1-az1",
		"topology.kubernetes.io/zone": "us-east-1a", "node.kubernetes.io/instance-type": "t4g.small"} {
		assert.Equal(t, v, node.Labels[k], k)
	}
	for k, v := range node.Labels {
		assert.NotEmpty(t, v, "no empty label: %s", k)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		assert.True(t, node.Status.Allocatable[r].Equal(nc.Status.Allocatable[r]), "the claim's %s allocatable is the node's", r)
		assert.True(t, node.Status.Capacity[r].Equal(nc.Status.Capacity[r]), "the claim's %s capacity is the node's", r)
	}
	assert.Contains(t, node.Finalizers, karpv1.TerminationFinalizer, "finalized at registration, so a deleted node is drained first")
	blockOwnerDeletion := true
	assert.Contains(t, node.OwnerReferences, metav1.OwnerReference{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: nc.Name,
		UID: nc.UID, BlockOwnerDeletion: &blockOwnerDeletion}, "owned by its claim, as Karpenter's nodes are")
	assert.Equal(t, "2500", node.Labels["karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"])
	assert.Equal(t, "false", node.Labels["karpenter.k8s.aws/instance-encryption-in-transit-supported"])
	for _, taint := range node.Spec.Taints {
		assert.NotEqual(t, karpv1.UnregisteredTaintKey, taint.Key, "lifted at registration")
	}
	r := e.nextResult()
	assert.Equal(t, launchv1.LaunchOutcome_LAUNCH_OUTCOME_LAUNCHED, r.Outcome)
	assert.Equal(t, nc.Status.ProviderID, r.ProviderId)
	require.Eventually(t, func() bool {
		got := e.eventReasons("NodeClaim", "default-launch1")
		return got["Launched"] && got["Registered"] && got["Initialized"]
	}, 30*time.Second, 100*time.Millisecond, "kubectl describe nodeclaim shows its way to a node")
	require.Eventually(t, func() bool {
		got := e.eventReasons("Node", nc.Status.NodeName)
		return got["Registered"] && got["Initialized"]
	}, 30*time.Second, 100*time.Millisecond, "and the node's")

	// The same intent again (a redelivery, another replica): nothing new is launched.
	e.publish(intent, intent.NodeClaimName+"-again")
	require.Never(t, func() bool { return len(e.instancesFor("default-launch1")) != 1 }, 3*time.Second, 100*time.Millisecond)

	// The catalog the scheduler reads is in the KV bucket, with spot and on-demand offerings.
	kv, err := e.js.KeyValue(e.ctx, "fleetwright-catalog")
	require.NoError(t, err)
	w, err := catalogkv.Watch(e.ctx, kv)
	require.NoError(t, err)
	require.Eventually(t, func() bool { c, _, err := w.Catalog(); return err == nil && len(c.InstanceTypes) > 1000 }, 60*time.Second, 100*time.Millisecond)
	cat, _, _ := w.Catalog()
	idx := sort.Search(len(cat.InstanceTypes), func(i int) bool { return cat.InstanceTypes[i].Name >= "m5.large" })
	m5 := cat.InstanceTypes[idx]
	require.Equal(t, "m5.large", m5.Name)
	assert.Equal(t, int32(2), m5.Vcpu)
	assert.Equal(t, int64(8192), m5.MemoryMib)
	assert.Equal(t, int32(29), m5.MaxPods)
	assert.Equal(t, int32(3100), m5.CpuSustainedClockSpeedMhz, "DescribeInstanceTypes' 3.1 GHz")
	kinds := map[commonv1.CapacityType]int{}
	for _, o := range m5.Offerings {
		kinds[o.CapacityType]++
		if o.CapacityType == commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND {
			assert.Equal(t, 0.096, o.PriceUsdPerHour)
		}
	}
	assert.Equal(t, 3, kinds[commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND], "offered in every zone")
	assert.Equal(t, 3, kinds[commonv1.CapacityType_CAPACITY_TYPE_SPOT])
}

// Registration follows Node and NodeClaim changes, not a clock: with the periodic safety-net
// pass an hour away (its first run was at start, before the claim existed), a launched claim's
// node is linked, loses karpenter.sh/unregistered, and is initialized once its agent removes
// the startup taint, each within seconds of the change that allows it.
func TestRegistrationFollowsChangesNotTheResync(t *testing.T) {
	e := start(t, "--registration-resync", "1h")
	e.launch("default", "default-onchange1", "t4g.small")
	e.claimWhen("default-onchange1", 90*time.Second, hasInstance, "launched")
	nc := e.claimWhen("default-onchange1", 10*time.Second, isRegistered, "registered on the change, not at the hourly resync")
	assert.False(t, slices.ContainsFunc(e.node(nc).Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.UnregisteredTaintKey }),
		"lifted at registration")
	e.agentReady(nc)
	e.claimWhen("default-onchange1", 10*time.Second, isInitialized, "initialized on the taint's removal, not at the hourly resync")
}

// A pool out of capacity (ICE) is reported unavailable and the launch succeeds on the next
// offering; the next claim does not try the exhausted pool again.
func TestInsufficientCapacityFallsThroughAndIsRemembered(t *testing.T) {
	e := start(t)
	require.NoError(t, e.emu.SetCapacity(e.ctx, awsemu.CapacityRule{Pool: awsemu.Pool{InstanceType: "t4g.small", Zone: "us-east-1a", CapacityType: "spot"}, Capacity: 0}))
	unavailable := make(chan *launchv1.OfferingUnavailable, 10)
	sub, err := e.nc.Subscribe("fleetwright.offerings.unavailable", func(m *nats.Msg) {
		var o launchv1.OfferingUnavailable
		if proto.Unmarshal(m.Data, &o) == nil {
			unavailable <- &o
		}
	})
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()

	e.launch("default", "default-ice1", "t4g.small", "t4g.medium")
	nc := e.claimWhen("default-ice1", 60*time.Second, hasInstance, "launched")
	assert.False(t, nc.Labels[karpv1.LabelInstanceType] == "t4g.small" && nc.Labels[karpv1.CapacityTypeLabelKey] == "spot",
		"launched on another offering than the exhausted one")
	select {
	case o := <-unavailable:
		assert.Equal(t, "t4g.small", o.InstanceType)
		assert.Equal(t, "us-east-1a", o.Zone)
		assert.Equal(t, commonv1.CapacityType_CAPACITY_TYPE_SPOT, o.CapacityType)
		assert.Equal(t, 3*time.Minute, o.Ttl.AsDuration())
	case <-time.After(10 * time.Second):
		t.Fatal("no OfferingUnavailable published")
	}

	before := e.createFleetCalls()
	e.launch("default", "default-ice2", "t4g.small", "t4g.medium")
	e.claimWhen("default-ice2", 60*time.Second, hasInstance, "launched")
	assert.Equal(t, before+1, e.createFleetCalls(), "the second claim launched in one call: the exhausted pool was not offered again")
}

// A claim no offering has capacity for fails for good: it is deleted, so its pods are scheduled
// again, and kubectl describe says why with Karpenter's InsufficientCapacityError.
func TestInsufficientCapacityEverywhereFailsTheClaimWithAnEvent(t *testing.T) {
	e := start(t)
	require.NoError(t, e.emu.SetCapacity(e.ctx, awsemu.CapacityRule{Pool: awsemu.Pool{InstanceType: "t4g.nano"}, Capacity: 0}))
	e.launch("default", "default-noroom1", "t4g.nano")
	require.Eventually(t, func() bool { return e.nodeClaim("default-noroom1") == nil }, 60*time.Second, 100*time.Millisecond,
		"the claim nothing can launch is deleted")
	require.Eventually(t, func() bool { return e.eventReasons("NodeClaim", "default-noroom1")["InsufficientCapacityError"] },
		30*time.Second, 100*time.Millisecond, "an InsufficientCapacityError event on the claim")
}

// A v1alpha5 user has an AWSNodeTemplate and no EC2NodeClass: the launcher translates it and
// launches an AL2 node (v1alpha5's default family) that registers with the pool's labels.
func TestLaunchFromAWSNodeTemplate(t *testing.T) {
	e := start(t)
	tmpl := "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata:\n  name: legacy\nspec:\n" +
		"  subnetSelector:\n    karpenter.sh/discovery: demo-cluster\n  securityGroupSelector:\n    karpenter.sh/discovery: demo-cluster\n"
	e.apply(tmpl)

	e.launch("legacy", "default-legacy1", "m5.large")
	nc := e.claimWhen("default-legacy1", 90*time.Second, isRegistered, "launched from the translated template and registered")
	require.Len(t, e.instancesFor("default-legacy1"), 1)
	node := e.node(nc)
	assert.Equal(t, "a", node.Labels["team"])
	assert.Equal(t, "m5.large", node.Labels[karpv1.LabelInstanceType])
}

// A node class Fleetwright cannot launch from — here Bottlerocket user data that is not TOML,
// which admission cannot check — fails its claim at once with the reason, instead of launching
// something else or retrying.
func TestInvalidNodeClassFailsTheClaimWithItsReason(t *testing.T) {
	e := start(t)
	e.apply(nodeClassManifest("broken", "  amiFamily: Bottlerocket\n  userData: |\n    [settings.kubernetes\n"+demoRole+discoveredAMIs))
	// Launched once its status says it is Ready (a claim of a class not judged yet is tried again).
	require.Eventually(t, func() bool {
		_, c := e.class("broken", ec2v1.ConditionTypeReady)
		return c != nil && c.Status == metav1.ConditionTrue
	}, 30*time.Second, 100*time.Millisecond, "the class is judged Ready")

	e.launch("broken", "default-broken1", "m5.large")
	r := e.nextFailure("NodeClassInvalid", "parsing the node class's Bottlerocket user data as TOML")
	assert.Equal(t, int32(1), r.Attempt, "not retried: the class must change")
	require.Eventually(t, func() bool { return e.nodeClaim("default-broken1") == nil }, 30*time.Second, 100*time.Millisecond,
		"the claim is deleted so its pods are scheduled again")
	assert.Empty(t, e.instancesFor("default-broken1"), "nothing was launched")
	require.Eventually(t, func() bool { return e.eventReasons("NodeClaim", "default-broken1")["NodeClassNotReady"] }, 30*time.Second, 100*time.Millisecond,
		"the claim's events say why it failed")
}

// eventReasons returns the reasons of the launcher's events on an object.
func (e *env) eventReasons(kind, name string) map[string]bool {
	var list corev1.EventList
	out := map[string]bool{}
	if err := e.kube.List(e.ctx, &list, client.InNamespace("default"), client.MatchingFields{"involvedObject.name": name}); err != nil {
		return out
	}
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == kind && ev.Source.Component == "fleetwright-launcher" {
			out[ev.Reason] = true
		}
	}
	return out
}

// `kubectl get ec2nodeclasses,nodepools` tells the truth: a class says what it resolved to and
// is Ready; a pool counts its nodes and their capacity; a pool whose class does not exist is not
// Ready and says why.
func TestStatusOfClassesAndPools(t *testing.T) {
	e := start(t)
	pool := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: orphaned\nspec:\n  template:\n    spec:\n" +
		"      nodeClassRef:\n        group: karpenter.k8s.aws\n        kind: EC2NodeClass\n        name: missing\n      requirements: []\n"
	e.applyUntilEnd(pool)

	e.launch("default", "default-status1", "t4g.small")
	var class *ec2v1.EC2NodeClass
	require.Eventually(t, func() bool {
		nc, r := e.class("default", ec2v1.ConditionTypeReady)
		class = nc
		return r != nil && r.Status == metav1.ConditionTrue
	}, 30*time.Second, 100*time.Millisecond, "the default class is Ready")
	assert.NotEmpty(t, class.Status.Subnets)
	assert.NotEmpty(t, class.Status.SecurityGroups)
	require.NotEmpty(t, class.Status.AMIs)
	archs := map[string]bool{}
	for _, ami := range class.Status.AMIs {
		archs[ami.Requirements[0].Values[0]] = true
	}
	assert.True(t, archs["arm64"], "al2023@latest has images for the pool's arm64 types")

	var np karpv1.NodePool
	require.Eventually(t, func() bool {
		if e.kube.Get(e.ctx, client.ObjectKey{Name: "default"}, &np) != nil {
			return false
		}
		r := meta.FindStatusCondition(np.Status.Conditions, "Ready")
		n := np.Status.Resources[corev1.ResourceName("nodes")]
		return r != nil && r.Status == metav1.ConditionTrue && n.Value() == 1
	}, 60*time.Second, 100*time.Millisecond, "the default pool is Ready with its one node")
	cpu := np.Status.Resources[corev1.ResourceCPU]
	assert.Equal(t, int64(2), cpu.Value(), "a t4g.small's 2 vCPUs")

	require.Eventually(t, func() bool {
		if e.kube.Get(e.ctx, client.ObjectKey{Name: "orphaned"}, &np) != nil {
			return false
		}
		r := meta.FindStatusCondition(np.Status.Conditions, "Ready")
		return r != nil && r.Status == metav1.ConditionFalse && r.Reason == "NodeClassNotFound"
	}, 30*time.Second, 100*time.Millisecond, "a pool on a missing class is not Ready, and says why")
	assert.Contains(t, meta.FindStatusCondition(np.Status.Conditions, "Ready").Message, `"missing"`)
}

// apply writes the manifest to a file and applies it, returning the file for a later delete.
func (e *env) apply(manifest string) string {
	e.t.Helper()
	path := filepath.Join(e.t.TempDir(), "manifest.yaml")
	require.NoError(e.t, os.WriteFile(path, []byte(manifest), 0o644))
	_, err := e2e.Kubectl(e2e.Cluster(e.t), "apply", "-f", path)
	require.NoError(e.t, err)
	return path
}

// applyUntilEnd is apply, with what it made deleted again when the test ends.
func (e *env) applyUntilEnd(manifest string) string {
	e.t.Helper()
	path := e.apply(manifest)
	e.t.Cleanup(func() { _, _ = e2e.Kubectl(e2e.Cluster(e.t), "delete", "--ignore-not-found", "-f", path) })
	return path
}

// Claims of one configuration share one launch template: a claim's own tags go on its
// instances, not the template, so launches never exhaust the account's template quota.
func TestClaimsOfOneConfigurationShareALaunchTemplate(t *testing.T) {
	e := start(t)
	var names []string
	for i := range 100 {
		names = append(names, fmt.Sprintf("default-shared%d", i))
	}
	for _, name := range names {
		e.launch("default", name, "t4g.small")
	}
	for _, name := range names {
		require.Eventually(t, func() bool { return len(e.instancesFor(name)) == 1 }, 60*time.Second, 100*time.Millisecond, name)
	}
	templates := map[string]bool{}
	for _, name := range names {
		templates[e.templateID(name)] = true
	}
	assert.Len(t, templates, 1, "one template for a hundred claims of one pool, class and AMI")
	lts, err := e.emu.LaunchTemplates(e.ctx)
	require.NoError(t, err)
	assert.Len(t, lts, 1, "and the emulator holds no other")
}

// A node class that is deleted takes its launch templates with it; the templates of the classes
// that remain stay.
func TestLaunchTemplatesOfDeletedClassesAreDeleted(t *testing.T) {
	e := start(t, "--template-gc-interval", "200ms")
	path := e.apply(classManifest("doomed", demoRole))
	for _, c := range []struct{ class, claim string }{{"doomed", "default-doomed1"}, {"default", "default-kept1"}} {
		e.launch(c.class, c.claim, "t4g.small")
		require.Eventually(t, func() bool { return len(e.instancesFor(c.claim)) == 1 }, 60*time.Second, 100*time.Millisecond, c.claim)
	}
	doomed, kept := e.templateID("default-doomed1"), e.templateID("default-kept1")
	require.NotEqual(t, doomed, kept)
	api := ec2.NewFromConfig(e.awsConfig())
	exists := func(id string) bool {
		out, err := api.DescribeLaunchTemplates(e.ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{id}})
		return err == nil && len(out.LaunchTemplates) == 1
	}
	require.True(t, exists(doomed))
	_, err := e2e.Kubectl(e2e.Cluster(t), "delete", "-f", path)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !exists(doomed) }, 30*time.Second, 100*time.Millisecond, "the deleted class's template is deleted")
	assert.True(t, exists(kept), "the template of a class that remains stays")
}

// A node class's block devices go on the launch template, its kubelet settings and RAID0
// policy into the user data, and the node registers (and the claim reports) the capacity they
// make; a change of volumes makes a new template.
func TestNodeClassKubeletAndVolumesReachTheTemplateAndNode(t *testing.T) {
	e := start(t)
	e.apply(classManifest("volumes", demoRole+"  kubelet:\n    maxPods: 10\n    kubeReserved:\n      memory: 1Gi\n"+
		"  blockDeviceMappings:\n  - deviceName: /dev/xvda\n    rootVolume: true\n    ebs:\n      volumeSize: 120Gi\n      volumeType: gp3\n"+
		"      iops: 4000\n      throughput: 250\n      encrypted: true\n      deleteOnTermination: true\n"))
	e.launch("volumes", "default-volumes1", "t4g.small")
	nc := e.claimWhen("default-volumes1", 90*time.Second, isRegistered, "launched and registered")
	lt := e.template("default-volumes1")
	assert.Equal(t, []awsemu.BlockDevice{{DeviceName: "/dev/xvda", VolumeSizeGiB: 120, VolumeType: "gp3", IOPS: 4000, Throughput: 250,
		Encrypted: ptrTo(true), DeleteOnTermination: ptrTo(true)}}, lt.BlockDevices)
	assert.Contains(t, lt.UserData, "maxPods: 10")
	assert.Contains(t, lt.UserData, "kubeReserved:\n        memory: 1Gi")

	node := e.node(nc)
	assert.Equal(t, int64(10), node.Status.Allocatable.Pods().Value(), "the node registers maxPods")
	assert.Equal(t, "120Gi", node.Status.Capacity.StorageEphemeral().String(), "on the class's root volume")
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
		assert.True(t, node.Status.Allocatable[r].Equal(nc.Status.Allocatable[r]), "the claim's %s allocatable is the node's", r)
	}

	// A default class gets its family's 20Gi root, on another template.
	e.launch("default", "default-volumes2", "t4g.small")
	require.Eventually(t, func() bool { return len(e.instancesFor("default-volumes2")) == 1 }, 60*time.Second, 100*time.Millisecond)
	tmpl := e.template("default-volumes2")
	assert.NotEqual(t, lt.ID, tmpl.ID)
	require.Len(t, tmpl.BlockDevices, 1, "the default class's template has the family's root volume")
	assert.Equal(t, "/dev/xvda", tmpl.BlockDevices[0].DeviceName)
	assert.Equal(t, int32(20), tmpl.BlockDevices[0].VolumeSizeGiB, "the family's 20Gi")
}

func ptrTo[T any](v T) *T { return &v }

// Lines of an EC2NodeClass's spec (two-space indented): the demo cluster's node role, and AMIs
// found by the cluster's discovery tag.
const (
	demoRole       = "  role: KarpenterNodeRole-demo-cluster\n"
	discoveredAMIs = "  amiSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: demo-cluster\n"
)

// nodeClassManifest is an EC2NodeClass on the discovery-tagged subnets and groups, with the
// other spec lines.
func nodeClassManifest(name, spec string) string {
	return "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata:\n  name: " + name + "\nspec:\n" + spec +
		"  subnetSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: demo-cluster\n" +
		"  securityGroupSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: demo-cluster\n"
}

// classManifest is the nodeClassManifest of an al2023@latest class, with extra spec lines.
func classManifest(name, extra string) string {
	return nodeClassManifest(name, "  amiFamily: AL2023\n  amiSelectorTerms:\n  - alias: al2023@latest\n"+extra)
}

// class reads an EC2NodeClass and one of its conditions (nil if it has none yet).
func (e *env) class(name, condition string) (*ec2v1.EC2NodeClass, *metav1.Condition) {
	var nc ec2v1.EC2NodeClass
	if e.kube.Get(e.ctx, client.ObjectKey{Name: name}, &nc) != nil {
		return nil, nil
	}
	return &nc, meta.FindStatusCondition(nc.Status.Conditions, condition)
}

func (e *env) profile(name string) *awsemu.InstanceProfileInfo {
	profiles, err := e.emu.InstanceProfiles(e.ctx)
	require.NoError(e.t, err)
	for _, p := range profiles {
		if p.Name == name {
			return &p
		}
	}
	return nil
}

// A class's role becomes an instance profile of its own — named and tagged as Karpenter names
// and tags it, holding the role (replaced when the class's role changes) — that its instances
// launch with; the class's metadata options, public address, monitoring and context reach the
// launch; and the profile is deleted with the class.
func TestRoleInstanceProfileAndLaunchFields(t *testing.T) {
	e := start(t, "--template-gc-interval", "200ms")
	path := e.applyUntilEnd(classManifest("tuned", demoRole+"  associatePublicIPAddress: true\n  detailedMonitoring: true\n"+
		"  context: reserved-ctx\n  tags:\n    team: a\n  metadataOptions:\n    httpPutResponseHopLimit: 2\n    httpTokens: optional\n"))

	e.launch("tuned", "default-tuned1", "t4g.small")
	require.Eventually(t, func() bool { return len(e.instancesFor("default-tuned1")) == 1 }, 60*time.Second, 100*time.Millisecond, "launched")
	inst := e.instancesFor("default-tuned1")[0]
	assert.Regexp(t, `^demo-cluster_[0-9]+$`, inst.InstanceProfile, "Karpenter's name: <cluster>_<hash of region and class>")
	assert.Equal(t, "reserved-ctx", inst.Context, "the class's context is the fleet's")
	p := e.profile(inst.InstanceProfile)
	require.NotNil(t, p, "the profile exists in IAM")
	assert.Equal(t, "KarpenterNodeRole-demo-cluster", p.Role)
	assert.Equal(t, "/fleetwright/us-east-1/demo-cluster/", p.Path)
	tags := map[string]string{}
	for _, tag := range p.Tags {
		tags[tag.Key] = tag.Value
	}
	assert.Equal(t, map[string]string{"kubernetes.io/cluster/demo-cluster": "owned", "karpenter.k8s.aws/ec2nodeclass": "tuned", "eks:eks-cluster-name": "demo-cluster",
		"topology.kubernetes.io/region": "us-east-1", "team": "a"}, tags)

	lt := e.template("default-tuned1")
	assert.Equal(t, inst.InstanceProfile, lt.InstanceProfile)
	assert.Equal(t, awsemu.MetadataOptions{HTTPEndpoint: "enabled", HTTPProtocolIPv6: "disabled", HTTPPutResponseHopLimit: 2, HTTPTokens: "optional"}, lt.MetadataOptions,
		"the class's settings, the CRD's defaults for the rest")
	require.Len(t, lt.NetworkInterfaces, 1)
	assert.Equal(t, 0, lt.NetworkInterfaces[0].DeviceIndex)
	assert.Equal(t, true, *lt.NetworkInterfaces[0].AssociatePublicIPAddress)
	assert.NotEmpty(t, lt.NetworkInterfaces[0].SecurityGroups, "the groups move to the interface")
	assert.Empty(t, lt.SecurityGroups)
	assert.True(t, lt.Monitoring)

	require.Eventually(t, func() bool {
		class, c := e.class("tuned", ec2v1.ConditionTypeInstanceProfileReady)
		return c != nil && c.Status == metav1.ConditionTrue && class.Status.InstanceProfile == inst.InstanceProfile
	}, 30*time.Second, 100*time.Millisecond, "the class's status names its profile")

	// Another role: the profile holds it instead.
	iamAPI := iam.NewFromConfig(e.awsConfig())
	_, err := iamAPI.CreateRole(e.ctx, &iam.CreateRoleInput{RoleName: aws.String("OtherNodeRole"), AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17"}`)})
	require.NoError(t, err)
	e.apply(classManifest("tuned", "  role: OtherNodeRole\n"))
	require.Eventually(t, func() bool { p := e.profile(inst.InstanceProfile); return p != nil && p.Role == "OtherNodeRole" }, 30*time.Second, 100*time.Millisecond,
		"the profile's role is replaced")

	_, err = e2e.Kubectl(e2e.Cluster(t), "delete", "-f", path)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.profile(inst.InstanceProfile) == nil }, 30*time.Second, 100*time.Millisecond, "the deleted class's profile is deleted")
	assert.NotNil(t, e.profile("KarpenterNodeInstanceProfile-demo-cluster"), "profiles it did not make stay")
	require.Eventually(t, func() bool {
		class, _ := e.class("default", "")
		return class != nil && class.Status.InstanceProfile != "" && e.profile(class.Status.InstanceProfile) != nil
	}, 30*time.Second, 100*time.Millisecond, "the profile of the class that remains stays")
}

// A class whose role does not exist is not Ready, and says why; its claims fail with the
// reason and nothing is launched, not even a launch template.
func TestMissingRoleMakesTheClassNotReady(t *testing.T) {
	e := start(t)
	e.applyUntilEnd(classManifest("norole", "  role: NoSuchRole\n"))

	var c *metav1.Condition
	require.Eventually(t, func() bool {
		_, c = e.class("norole", ec2v1.ConditionTypeInstanceProfileReady)
		return c != nil && c.Status == metav1.ConditionFalse
	}, 30*time.Second, 100*time.Millisecond, "InstanceProfileReady is False")
	assert.Equal(t, "NotFound", c.Reason)
	assert.Contains(t, c.Message, "role NoSuchRole does not exist")
	assert.Contains(t, c.Message, "NoSuchEntity: The role with name NoSuchRole cannot be found.", "IAM's error")
	_, ready := e.class("norole", ec2v1.ConditionTypeReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Contains(t, ready.Message, "InstanceProfileReady")

	// An instance profile given by name is used as it is, once it is known to exist.
	e.applyUntilEnd(classManifest("noprofile", "  instanceProfile: NoSuchProfile\n"))
	require.Eventually(t, func() bool {
		_, c = e.class("noprofile", ec2v1.ConditionTypeInstanceProfileReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "NotFound"
	}, 30*time.Second, 100*time.Millisecond, "a given profile that does not exist")
	assert.Contains(t, c.Message, "instance profile NoSuchProfile does not exist")

	// A claim of a class that is not Ready is not launched, and is deleted, as Karpenter's.
	e.launch("norole", "default-norole1", "t4g.small")
	e.nextFailure("NodeClassNotReady", "EC2NodeClass norole is not Ready: "+ready.Message)
	assert.Empty(t, e.instancesFor("default-norole1"), "nothing was launched")
	lts, err := e.emu.LaunchTemplates(e.ctx)
	require.NoError(t, err)
	for _, lt := range lts {
		for _, tag := range lt.Tags {
			assert.False(t, tag.Key == "karpenter.k8s.aws/ec2nodeclass" && tag.Value == "norole", "no launch template for the class")
		}
	}
}

// awsConfig is the SDK configuration the launcher uses (the emulator's endpoints).
func (e *env) awsConfig() aws.Config {
	cfg, err := awsconfig.LoadDefaultConfig(e.ctx)
	require.NoError(e.t, err)
	return cfg
}

// Under the Custom AMI family the class's user data is used as it is, and the claim's labels,
// taints and startup taints reach the Node at registration all the same, as Karpenter syncs them.
func TestCustomFamilyUserDataAsItIsAndTaintsSyncedAtRegistration(t *testing.T) {
	e := start(t)
	script := "#!/bin/bash\n/opt/bootstrap --cluster demo-cluster\n"
	e.apply(nodeClassManifest("custom", "  amiFamily: Custom\n"+demoRole+discoveredAMIs+
		"  userData: |\n    #!/bin/bash\n    /opt/bootstrap --cluster demo-cluster\n"))
	e.launch("custom", "default-custom1", "m5.large")
	nc := e.claimWhen("default-custom1", 90*time.Second, isRegistered, "launched and registered")
	assert.Equal(t, script, e.template("default-custom1").UserData, "the class's user data, nothing added")
	node := e.node(nc)
	assert.Equal(t, "a", node.Labels["team"], "the claim's labels")
	assert.Contains(t, node.Spec.Taints, corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule},
		"the claim's startup taint, though no user data asked the kubelet for it")
}

// The launcher's workers and its status writer ask for a new class's instance profile at the
// same moment: each gets it, none an EntityAlreadyExists or a second-role error to retry on.
func TestInstanceProfileMadeOnceUnderConcurrentAsks(t *testing.T) {
	e := start(t)
	profiles := newInstanceProfiles(iam.NewFromConfig(e.awsConfig()), "demo-cluster", "us-east-1", time.Minute, time.Now)
	class := nodeClassSpec{Name: "concurrent", Role: "KarpenterNodeRole-demo-cluster"}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := profiles.resolve(e.ctx, class)
			errs <- err
		}()
	}
	for range 8 {
		assert.NoError(t, <-errs)
	}
	got, err := e.emu.InstanceProfiles(e.ctx)
	require.NoError(t, err)
	n := 0
	for _, p := range got {
		if p.Name == profiles.name("concurrent") {
			n++
			assert.Equal(t, "KarpenterNodeRole-demo-cluster", p.Role)
		}
	}
	assert.Equal(t, 1, n)
}

// A first catalog refresh that fails (EC2 throttling every DescribeInstanceTypes) is tried again
// within seconds, not at the next refresh an hour later: launches start once EC2 answers.
func TestFailedFirstCatalogIsRetriedSoon(t *testing.T) {
	e := startWith(t, func(emu *awsemu.Emulator) {
		require.NoError(t, emu.SetThrottle(awsemu.Throttle{Service: "ec2", Actions: []string{"DescribeInstanceTypes"}, Share: 1}))
	}, "--catalog-refresh", "1h")
	require.Eventually(t, func() bool {
		throttled := e.countCalls(func(c awsemu.Call) bool { return c.Action == "DescribeInstanceTypes" && c.Throttled })
		return throttled >= 3 // the SDK's attempts for one call: the first refresh has failed
	}, 60*time.Second, 50*time.Millisecond, "the first refresh fails on throttling")
	require.NoError(t, e.emu.Throttle(e.ctx, awsemu.Throttle{}))
	e.launch("default", "default-catalog1", "t4g.small")
	require.Eventually(t, func() bool { return len(e.instancesFor("default-catalog1")) == 1 }, 30*time.Second, 100*time.Millisecond,
		"launched once the catalog is out")
}

// A NodeClaim made by hand, of no NodePool, is launched like any other: its instance carries the
// karpenter.sh/nodepool tag (empty, as Karpenter tags it), and its node no empty
// karpenter.sh/nodepool label.
func TestStandaloneClaimIsOfNoPool(t *testing.T) {
	e := start(t)
	intent := e.claimOf("default", "standalone", "t4g.small")
	nc := e.nodeClaim("standalone")
	delete(nc.Labels, karpv1.NodePoolLabelKey)
	require.NoError(t, e.kube.Update(e.ctx, nc))
	intent.NodePoolName = ""
	e.publish(intent, "standalone")
	nc = e.claimWhen("standalone", 90*time.Second, isRegistered, "launched and registered")
	node := e.node(nc)
	_, labelled := node.Labels[karpv1.NodePoolLabelKey]
	assert.False(t, labelled, "no karpenter.sh/nodepool label: the claim is of no pool")
	for k, v := range node.Labels {
		assert.NotEmpty(t, v, "no empty label: %s", k)
	}
	insts := e.instancesFor("standalone")
	require.Len(t, insts, 1)
	assert.True(t, slices.ContainsFunc(insts[0].Tags, func(t awsemu.Tag) bool { return t.Key == "karpenter.sh/nodepool" }),
		"tagged karpenter.sh/nodepool, as every instance the launcher starts")
}
