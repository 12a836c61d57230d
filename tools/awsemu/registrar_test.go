package awsemu

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
