package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// Every NodeClaim records the hash of the NodePool it was made from and of its EC2NodeClass,
// with their versions, as Karpenter's do: what drift detection compares with later.
func TestClaimsRecordPoolAndClassHashes(t *testing.T) {
	e := newEnv(t, "sched-hash", v1Example)
	e.start("hash")
	e.schedule("hash-1", e.pendingPods("inflate", 2, "500m"))

	nc := e.onlyClaim()
	var pool karpv1.NodePool
	u, err := e.dyn.Resource(clusterstate.NodePools).Get(e.ctx, "default", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pool))
	var class ec2v1.EC2NodeClass
	u, err = e.dyn.Resource(clusterstate.NodeClasses).Get(e.ctx, "default", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &class))

	got := nc.Annotations
	require.NotEmpty(t, pool.Hash())
	assert.Equal(t, pool.Hash(), got[karpv1.NodePoolHashAnnotationKey])
	assert.Equal(t, karpv1.NodePoolHashVersion, got[karpv1.NodePoolHashVersionAnnotationKey])
	assert.Equal(t, class.Hash(), got[ec2v1.AnnotationEC2NodeClassHash])
	assert.Equal(t, ec2v1.EC2NodeClassHashVersion, got[ec2v1.AnnotationEC2NodeClassHashVersion])
}
