package awsemu

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/tools/localcluster/clustertest"
)

func TestMain(m *testing.M) { clustertest.Main(m) }

// TestFleetRegistersAReadyNodeAndTerminationRemovesIt runs against the local control plane
// (kube-apiserver + kwok): user data labels and taints reach the Node, kwok makes it Ready,
// and terminating the instance deletes it.
func TestFleetRegistersAReadyNodeAndTerminationRemovesIt(t *testing.T) {
	cluster := clustertest.Get(t)
	reg, err := NewRegistrarFromKubeconfig(cluster.Kubeconfig)
	require.NoError(t, err)
	kube, err := cluster.Client()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go reg.Run(ctx)
	e := newEnv(t, func(c *Config) {
		c.Registrar = reg
		c.Seed = time.Now().UnixNano() // unique node names on a shared cluster
	})

	img := e.image(t, "amazon-eks-node-1.32-*")
	e.template(t, "fw-registrar", img, `#!/bin/bash
/etc/eks/bootstrap.sh demo-cluster --kubelet-extra-args '--node-labels=a=b --register-with-taints=t=v:NoSchedule'
`)
	ids := e.launch(t, e.fleet(t, "fw-registrar", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"}))
	require.Len(t, ids, 1)
	inst := e.instance(t, ids[0])
	e.clock.Advance(10 * time.Second) // past the boot delay

	var node *corev1.Node
	require.Eventually(t, func() bool {
		n, err := kube.CoreV1().Nodes().Get(ctx, inst.PrivateDNS, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				node = n
				return true
			}
		}
		return false
	}, 60*time.Second, 200*time.Millisecond, "node %s registered and Ready", inst.PrivateDNS)

	assert.Equal(t, "aws:///us-east-1a/"+inst.ID, node.Spec.ProviderID)
	assert.Equal(t, "b", node.Labels["a"])
	assert.Equal(t, "m5.large", node.Labels["node.kubernetes.io/instance-type"])
	assert.Equal(t, "us-east-1a", node.Labels["topology.kubernetes.io/zone"])
	for _, deprecated := range []string{"failure-domain.beta.kubernetes.io/zone", "topology.ebs.csi.aws.com/zone"} {
		assert.Equal(t, "us-east-1a", node.Labels[deprecated], "as an EKS node carries it")
	}
	assert.Contains(t, node.Spec.Taints, corev1.Taint{Key: "t", Value: "v", Effect: corev1.TaintEffectNoSchedule})
	assert.Equal(t, "2", node.Status.Capacity.Cpu().String())
	assert.Equal(t, "29", node.Status.Capacity.Pods().String())
	assert.Equal(t, "1930m", node.Status.Allocatable.Cpu().String())

	_, err = e.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
	require.NoError(t, err)
	e.clock.Advance(time.Minute) // shutdown and the cloud controller's delay
	require.Eventually(t, func() bool {
		_, err := kube.CoreV1().Nodes().Get(ctx, inst.PrivateDNS, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 200*time.Millisecond, "node deleted after termination")
}

// Kubelets register side by side: one node's registration held up on its way to the API server
// (its kubelet slow to reach it) does not hold up another's; one node's operations stay in
// order.
func TestRegistrationsDoNotWaitForEachOther(t *testing.T) {
	cluster := clustertest.Get(t)
	cfg, err := cluster.RESTConfig()
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	rt, err := rest.TransportFor(cfg)
	require.NoError(t, err)
	target, err := url.Parse(cfg.Host)
	require.NoError(t, err)

	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	slow, fast, gone := "slow-"+suffix, "fast-"+suffix, "gone-"+suffix
	for i := 0; NewRegistrar(nil).queueOf(slow) == NewRegistrar(nil).queueOf(fast); i++ {
		fast = "fast-" + strconv.Itoa(i) + "-" + suffix // on another worker than slow's
	}
	release := make(chan struct{})
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = rt
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method == http.MethodPost && bytes.Contains(body, []byte(slow)) {
			<-release
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer close(release)
	through, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)

	reg := NewRegistrar(through)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go reg.Run(ctx)
	it, ok := catalog.Lookup("m5.large")
	require.True(t, ok)
	spec := func(name string) NodeSpec {
		return NodeSpec{Name: name, InstanceID: "i-" + name, Type: it, Zone: "us-east-1a", Region: "us-east-1"}
	}
	exists := func(name string) bool {
		_, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	t.Cleanup(func() {
		for _, n := range []string{slow, fast, gone} {
			_ = kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	reg.Register(spec(slow))
	reg.Register(spec(fast))
	reg.Register(spec(gone))
	reg.Deregister(gone)
	require.Eventually(t, func() bool { return exists(fast) }, 30*time.Second, 20*time.Millisecond, "registered while another waits")
	require.False(t, exists(slow), "held on its way")
	release <- struct{}{}
	require.Eventually(t, func() bool { return exists(slow) }, 30*time.Second, 20*time.Millisecond)
	assert.Never(t, func() bool { return exists(gone) }, 500*time.Millisecond, 20*time.Millisecond, "registered, then deleted, in that order")
}
