package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/subject"
	"github.com/fleetwright/fleetwright/tools/awsemu"
	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/localcluster/clustertest"
)

func TestMain(m *testing.M) { clustertest.Main(m) }

// epoch is where the emulator's manual clock starts: it moves only when a test moves it, so
// no instance boots, stops or is reclaimed by itself.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var prefix = subject.DefaultPrefix

// env is one test's world: the shared control plane, the AWS emulator over HTTP, its own
// nats-server, and the terminator running in-process against all three.
type env struct {
	t     *testing.T
	ctx   context.Context
	kube  kubernetes.Interface
	dyn   dynamic.Interface
	emu   *awsemu.Emulator
	clock *awsemu.ManualClock
	ec2   *ec2.Client
	sqs   *sqs.Client
	js    jetstream.JetStream
	conn  *bus.Conn
	admin string
	ns    string

	natsURL, kubeconfig string
}

// newEnv starts everything but the terminator (see run). seed is the emulator's: a test of its
// own keeps its instance ids and node names apart from the other tests' on the shared control
// plane.
func newEnv(t *testing.T, seed int64) *env {
	c := e2e.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	kube, err := c.Client()
	require.NoError(t, err)
	rc, err := c.RESTConfig()
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(rc)
	require.NoError(t, err)

	clock := awsemu.NewManualClock(epoch)
	emu, err := awsemu.New(awsemu.Config{Clock: clock, Seed: seed})
	require.NoError(t, err)
	go emu.Run(ctx)
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_EC2": srv.URL, "AWS_ENDPOINT_URL_SQS": srv.URL, "AWS_ACCESS_KEY_ID": "x",
		"AWS_SECRET_ACCESS_KEY": "x", "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	awsCfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: credentials.NewStaticCredentialsProvider("x", "x", "")}

	nsrv := bustest.RunServer(t)
	nc, err := nats.Connect(nsrv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	conn, err := bus.Connect(ctx, bus.Config{URL: nsrv.ClientURL(), Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	// The streams the launcher would create (the terminator makes only its own and waits for
	// the rest).
	require.NoError(t, conn.EnsureStreams(ctx))

	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	return &env{t: t, ctx: ctx, kube: kube, dyn: dyn, emu: emu, clock: clock, ec2: ec2.NewFromConfig(awsCfg), sqs: sqs.NewFromConfig(awsCfg),
		js: js, conn: conn, admin: e2e.FreeAddr(t), ns: ns, natsURL: nsrv.ClientURL(), kubeconfig: c.Kubeconfig}
}

// run starts the terminator in-process, until the test ends, and waits until it is ready: its
// informers have listed what the test made before.
func (e *env) run(extra ...string) {
	t := e.t
	done := make(chan error, 1)
	tctx, stop := context.WithCancel(e.ctx)
	go func() {
		done <- run(tctx, append([]string{"--nats-url", e.natsURL, "--kubeconfig", e.kubeconfig, "--admin-addr", e.admin,
			"--cluster-name", "demo-cluster", "--sqs-wait", "1s", "--interval", "500ms", "--workers", "2"}, extra...))
	}()
	t.Cleanup(func() { stop(); assert.NoError(t, <-done, "the terminator stops cleanly") })
	var exited error
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			// Fail here, not in this condition's goroutine; leave the error for the clean-up.
			exited = fmt.Errorf("terminator exited: %w", err)
			done <- err
			return true
		default:
		}
		res, err := http.Get("http://" + e.admin + "/readyz")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond, "the terminator becomes ready")
	require.NoError(t, exited)
}

// fleetTags are the tags the launcher puts on every instance, which the terminator requires
// before it terminates one: the cluster's, and a node pool.
func fleetTags() []ec2types.Tag {
	return []ec2types.Tag{{Key: aws.String("kubernetes.io/cluster/demo-cluster"), Value: aws.String("owned")},
		{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")}}
}

// launch starts one instance of the capacity type through CreateFleet, tagged as the launcher
// tags it (fleetTags) and with the tags, and lets it boot.
func (e *env) launch(capacity ec2types.DefaultTargetCapacityType, tags ...ec2types.Tag) awsemu.InstanceInfo {
	e.t.Helper()
	return e.launchTagged(capacity, append(fleetTags(), tags...)...)
}

// launchTagged is launch with exactly the tags.
func (e *env) launchTagged(capacity ec2types.DefaultTargetCapacityType, tags ...ec2types.Tag) awsemu.InstanceInfo {
	e.t.Helper()
	imgs, err := e.ec2.DescribeImages(e.ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"},
		Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-x86_64-standard-1.32-*"}}}})
	require.NoError(e.t, err)
	require.NotEmpty(e.t, imgs.Images)
	subnets, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{})
	require.NoError(e.t, err)
	require.NotEmpty(e.t, subnets.Subnets)
	lt := fmt.Sprintf("lt-%s-%d", e.ns, len(e.emu.Instances()))
	_, err = e.ec2.CreateLaunchTemplate(e.ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(lt),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: imgs.Images[0].ImageId}})
	require.NoError(e.t, err)
	out, err := e.ec2.CreateFleet(e.ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", SubnetId: subnets.Subnets[0].SubnetId,
				AvailabilityZone: subnets.Subnets[0].AvailabilityZone}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: capacity},
		TagSpecifications:           []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}},
	})
	require.NoError(e.t, err)
	require.Len(e.t, out.Instances, 1)
	id := out.Instances[0].InstanceIds[0]
	e.clock.Advance(10 * time.Second) // boot
	return e.instance(id)
}

// instance is the emulator's view of one instance.
func (e *env) instance(id string) awsemu.InstanceInfo {
	for _, i := range e.emu.Instances() {
		if i.ID == id {
			return i
		}
	}
	e.t.Fatalf("no instance %s", id)
	return awsemu.InstanceInfo{}
}

// node registers a (kwok-style, kubelet-less) Node of pool "default" for a launched instance,
// with the termination finalizer, as it is once the terminator has seen it; edit changes it
// before it is created.
func (e *env) node(inst awsemu.InstanceInfo, edit ...func(*corev1.Node)) *corev1.Node {
	e.t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: inst.PrivateDNS, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}, Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec: corev1.NodeSpec{ProviderID: providerID(inst)},
	}
	for _, f := range edit {
		f(n)
	}
	n, err := e.kube.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { e.remove(e.dyn.Resource(corev1.SchemeGroupVersion.WithResource("nodes")), n.Name) })
	return n
}

// claim creates the NodeClaim of a launched instance of pool "default", as the scheduler and
// launcher leave it: provider id and (if node is set) node name in its status; edit changes it
// before it is created.
func (e *env) claim(name string, inst awsemu.InstanceInfo, node string, edit ...func(*karpv1.NodeClaim)) *karpv1.NodeClaim {
	e.t.Helper()
	return e.claimIn("default", name, inst, node, edit...)
}

// claimIn is claim, in the named pool.
func (e *env) claimIn(pool, name string, inst awsemu.InstanceInfo, node string, edit ...func(*karpv1.NodeClaim)) *karpv1.NodeClaim {
	e.t.Helper()
	nc := &karpv1.NodeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{inst.Type}}},
		},
	}
	for _, f := range edit {
		f(nc)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nc)
	require.NoError(e.t, err)
	res := e.dyn.Resource(clusterstate.NodeClaims)
	u, err := res.Create(e.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { e.remove(res, name) })
	require.NoError(e.t, unstructured.SetNestedField(u.Object, providerID(inst), "status", "providerID"))
	if node != "" {
		require.NoError(e.t, unstructured.SetNestedField(u.Object, node, "status", "nodeName"))
	}
	u, err = res.UpdateStatus(e.ctx, u, metav1.UpdateOptions{})
	require.NoError(e.t, err)
	require.NoError(e.t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, nc))
	return nc
}

func providerID(inst awsemu.InstanceInfo) string { return "aws:///" + inst.Zone + "/" + inst.ID }

// remove deletes a cluster-scoped object the test made, finalizers and all.
func (e *env) remove(res dynamic.NamespaceableResourceInterface, name string) {
	ctx := context.Background()
	if u, err := res.Get(ctx, name, metav1.GetOptions{}); err == nil {
		u.SetFinalizers(nil)
		_, _ = res.Update(ctx, u, metav1.UpdateOptions{})
	}
	if err := res.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		e.t.Logf("cleaning up %s: %v", name, err)
	}
}

// stored returns the messages JetStream holds on subjects matching filter, decoded, with
// their stream sequence numbers.
func stored[T proto.Message](e *env, filter string, newT func() T) ([]T, []uint64) {
	e.t.Helper()
	stream, err := e.js.StreamNameBySubject(e.ctx, filter)
	if err != nil {
		return nil, nil
	}
	cons, err := e.js.OrderedConsumer(e.ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	require.NoError(e.t, err)
	batch, err := cons.FetchNoWait(1000)
	require.NoError(e.t, err)
	var out []T
	var seqs []uint64
	for m := range batch.Messages() {
		v := newT()
		require.NoError(e.t, proto.Unmarshal(m.Data(), v))
		md, err := m.Metadata()
		require.NoError(e.t, err)
		out = append(out, v)
		seqs = append(seqs, md.Sequence.Stream)
	}
	return out, seqs
}

// consumed reports whether the durable consumer has acknowledged the stream's message seq.
func (e *env) consumed(filter, durable string, seq uint64) bool {
	stream, err := e.js.StreamNameBySubject(e.ctx, filter)
	if err != nil {
		return false
	}
	cons, err := e.js.Consumer(e.ctx, stream, durable)
	if err != nil {
		return false
	}
	info, err := cons.Info(e.ctx)
	return err == nil && info.AckFloor.Stream >= seq
}

// metric returns the text of the terminator's /metrics.
func (e *env) metrics() string {
	res, err := http.Get("http://" + e.admin + "/metrics")
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return string(b)
}

// conditionsAt records on the claim, as the launcher does, that the conditions (Launched,
// Registered, Initialized) became True at t.
func (e *env) conditionsAt(nc *karpv1.NodeClaim, t time.Time, types ...string) {
	e.t.Helper()
	res := e.dyn.Resource(clusterstate.NodeClaims)
	u, err := res.Get(e.ctx, nc.Name, metav1.GetOptions{})
	require.NoError(e.t, err)
	var conds []any
	for _, c := range types {
		conds = append(conds, map[string]any{"type": c, "status": "True", "reason": c, "message": "test", "lastTransitionTime": t.UTC().Format(time.RFC3339)})
	}
	require.NoError(e.t, unstructured.SetNestedSlice(u.Object, conds, "status", "conditions"))
	_, err = res.UpdateStatus(e.ctx, u, metav1.UpdateOptions{})
	require.NoError(e.t, err)
}
