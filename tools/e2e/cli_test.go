package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetwright/fleetwright/tools/e2e"
)

// fleetwright runs the operator CLI (tools/fleetwright, built as users build it) against the
// stack, with the settings a user has: KUBECONFIG and NATS_URL in the environment.
func fleetwright(t *testing.T, s *e2e.Stack, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2e.Build(t, "./tools/fleetwright"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.Cluster.Kubeconfig, "NATS_URL="+s.NATSURL, "FLEETWRIGHT_STATE="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		t.Logf("fleetwright %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), err
}

// whyJSON runs `fleetwright why ... -o json` and decodes the report into v.
func whyJSON(t *testing.T, s *e2e.Stack, v any, args ...string) {
	t.Helper()
	out, err := fleetwright(t, s, append(append([]string{"why"}, args...), "-o", "json")...)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), v), out)
}

// nodeReport is the part of the CLI's NodeReport the tests read.
type nodeReport struct {
	Node            string   `json:"node"`
	NodeClaim       string   `json:"nodeClaim"`
	NodePool        string   `json:"nodePool"`
	InCluster       bool     `json:"inCluster"`
	InstanceType    string   `json:"instanceType"`
	PriceUSDPerHour float64  `json:"priceUSDPerHour"`
	Pods            []string `json:"pods"`
	Batch           string   `json:"batch"`
	Considered      []struct {
		Name string `json:"name"`
	} `json:"considered"`
	Launched   *time.Time `json:"launched"`
	Registered *time.Time `json:"registered"`
	Blocked    []string   `json:"blocked"`
	TraceID    string     `json:"traceID"`
	TraceURL   string     `json:"traceURL"`
	Removal    *struct {
		Reason  string `json:"reason"`
		Why     string `json:"why"`
		Outcome string `json:"outcome"`
		Steps   []struct {
			Name string    `json:"name"`
			At   time.Time `json:"at"`
		} `json:"steps"`
	} `json:"removal"`
}

// The CLI against the real stack: simulate answers from the scheduler and creates nothing;
// after a scale-up `why node` names the pool, the instance type, its price and the pods; after
// the scale-down `why node` on the removed node names why it went.
func TestCLIWhyNodeSimulateAndRemoval(t *testing.T) {
	t.Parallel()
	s := v1Stack(t, `{"disruption":{"consolidateAfter":"5s"}}`)
	s.Apply("deploy/examples/inflate.yaml")

	// simulate: the scheduler's plan for three 1-CPU pods, and no NodeClaim made for it.
	workload := filepath.Join(t.TempDir(), "workload.yaml")
	require.NoError(t, os.WriteFile(workload, []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: pause, resources: {requests: {cpu: "1"}}}]
`), 0o600))
	out, err := fleetwright(t, s, "simulate", "-f", workload, "-o", "json")
	require.NoError(t, err)
	var sim struct {
		NodeClaims []struct {
			NodePool      string  `json:"nodePool"`
			Price         float64 `json:"priceUSDPerHour"`
			InstanceTypes []struct {
				Name string `json:"name"`
			} `json:"instanceTypes"`
			Pods []string `json:"pods"`
		} `json:"nodeClaims"`
		Price float64 `json:"priceUSDPerHour"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sim), out)
	require.NotEmpty(t, sim.NodeClaims, out)
	pods := 0
	for _, c := range sim.NodeClaims {
		assert.Equal(t, "default", c.NodePool)
		require.NotEmpty(t, c.InstanceTypes)
		assert.True(t, strings.HasPrefix(c.InstanceTypes[0].Name, "t4g."), "the pool allows t4g only: %s", c.InstanceTypes[0].Name)
		assert.Greater(t, c.Price, 0.0)
		pods += len(c.Pods)
	}
	assert.Equal(t, 3, pods, "every pod of the workload is planned")
	assert.Greater(t, sim.Price, 0.0)
	assert.Contains(t, s.Service("scheduler").Log(), "simulated a workload")
	assert.Empty(t, s.NodeClaims(t), "simulate creates no NodeClaim")
	text, err := fleetwright(t, s, "simulate", "-f", workload)
	require.NoError(t, err)
	assert.Contains(t, text, "nodepool default")
	t.Logf("fleetwright simulate:\n%s", text)
	assert.Contains(t, text, "nothing was created")

	// Scale up, then ask why each node is there.
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "3")
	podsRunning(t, s, "app=inflate", 3, 3*time.Minute)
	nodes := launchedNodes(t, s)
	require.NotEmpty(t, nodes)
	removed := nodes[0]
	var names []string
	for _, n := range nodes {
		var r nodeReport
		require.Eventually(t, func() bool {
			r = nodeReport{}
			whyJSON(t, s, &r, "node", n.Name, "--jaeger-url", "http://jaeger.example:16686")
			return r.Registered != nil
		}, 30*time.Second, time.Second, "the node's registration is on the bus")
		assert.Equal(t, n.Name, r.Node)
		assert.True(t, r.InCluster)
		assert.Equal(t, "default", r.NodePool, "the pool")
		assert.Equal(t, n.Labels[corev1.LabelInstanceTypeStable], r.InstanceType, "the instance type")
		assert.Greater(t, r.PriceUSDPerHour, 0.0, "the price")
		assert.NotEmpty(t, r.Pods, "the pods it was launched for")
		for _, p := range r.Pods {
			assert.True(t, strings.HasPrefix(p, "default/inflate-"), p)
		}
		names = append(names, r.Pods...)
		assert.NotEmpty(t, r.Batch, "the batch")
		assert.NotEmpty(t, r.Considered, "the instance types considered")
		assert.NotNil(t, r.Launched)
		// The stack exports no traces (see tracing_test.go for that), so the services' messages
		// may carry no trace context; when they do, the link goes with it.
		if r.TraceID != "" {
			assert.Regexp(t, `^[0-9a-f]{32}$`, r.TraceID)
			assert.Equal(t, "http://jaeger.example:16686/trace/"+r.TraceID, r.TraceURL)
		} else {
			assert.Empty(t, r.TraceURL, "no link without a trace")
		}
		if n.Name == removed.Name {
			var byClaim nodeReport
			whyJSON(t, s, &byClaim, "nodeclaim", r.NodeClaim)
			assert.Equal(t, r.Node, byClaim.Node, "why nodeclaim tells the same story")
		}
	}
	assert.Len(t, names, 3, "the nodes were launched for the three pods, each once")
	text, err = fleetwright(t, s, "why", "node", removed.Name)
	require.NoError(t, err)
	t.Logf("fleetwright why node %s:\n%s", removed.Name, text)
	for _, want := range []string{"NodePool:      default", removed.Labels[corev1.LabelInstanceTypeStable], "$", "default/inflate-"} {
		assert.Contains(t, text, want)
	}

	// Scale down: the empty nodes go; why node on a removed one says why.
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "0")
	require.Eventually(t, func() bool { return getNode(t, s, removed.Name) == nil && len(s.NodeClaims(t)) == 0 },
		3*time.Minute, 500*time.Millisecond, "the empty nodes are removed")
	var r nodeReport
	require.Eventually(t, func() bool {
		r = nodeReport{}
		whyJSON(t, s, &r, "node", removed.Name)
		return r.Removal != nil && r.Removal.Outcome != ""
	}, 30*time.Second, time.Second, "the termination's result is on the bus")
	assert.False(t, r.InCluster, "the node is gone")
	assert.Equal(t, "default", r.NodePool, "a removed node's pool is still known, from the history")
	assert.Contains(t, []string{"empty", "underutilized"}, r.Removal.Reason, "the reason")
	assert.Equal(t, "terminated", r.Removal.Outcome)
	var steps []string
	for _, st := range r.Removal.Steps {
		steps = append(steps, st.Name)
		assert.False(t, st.At.IsZero(), "step %s has its time", st.Name)
	}
	assert.Equal(t, []string{"Decided", "Deleted"}, steps, "the decision's steps, from the audit stream")
	text, err = fleetwright(t, s, "why", "node", removed.Name)
	require.NoError(t, err)
	t.Logf("fleetwright why node %s (removed):\n%s", removed.Name, text)
	assert.Contains(t, text, "Removal:       "+r.Removal.Reason)
}

// Why not: a node consolidation would replace, held back by a do-not-disrupt pod; `why node`
// says what blocks it.
func TestCLIWhyNodeNotDisrupted(t *testing.T) {
	t.Parallel()
	s, old := replacementSetup(t, "")
	s.Kubectl("annotate", "pods", "-l", "app=web", "karpenter.sh/do-not-disrupt=true")
	eventSays(t, s, "Unconsolidatable", "is annotated karpenter.sh/do-not-disrupt", 2*time.Minute)
	var r nodeReport
	whyJSON(t, s, &r, "node", old.Name)
	assert.True(t, r.InCluster)
	assert.Nil(t, r.Removal, "nothing removes it")
	require.NotEmpty(t, r.Blocked, "what blocks it")
	assert.Contains(t, strings.Join(r.Blocked, "\n"), "karpenter.sh/do-not-disrupt")
	text, err := fleetwright(t, s, "why", "node", old.Name)
	require.NoError(t, err)
	assert.Contains(t, text, "Not disrupted because:")
	assert.Contains(t, text, "do-not-disrupt")
}

// A pod no pool accepts: `why pod` gives the scheduler's explanation per NodePool.
func TestCLIWhyPodNoPoolAccepts(t *testing.T) {
	t.Parallel()
	s := e2e.NewStack(t, nil)
	s.Apply("deploy/examples/v1/default.yaml")
	s.Kubectl("patch", "nodepool", "default", "--type", "merge", "-p",
		`{"spec":{"template":{"spec":{"taints":[{"key":"example.com/special-taint","effect":"NoSchedule"}]}}}}`)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "intolerant", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
	_, err := s.Kube.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)

	var r struct {
		Pod         string `json:"pod"`
		Unplaceable []struct {
			NodePool string `json:"nodePool"`
			Why      string `json:"why"`
		} `json:"unplaceable"`
		Batches []struct {
			ID string `json:"id"`
		} `json:"batches"`
	}
	require.Eventually(t, func() bool {
		whyJSON(t, s, &r, "pod", "default/intolerant")
		return len(r.Unplaceable) > 0
	}, 90*time.Second, time.Second, "the scheduler's explanation reaches why pod")
	require.Len(t, r.Unplaceable, 1)
	assert.Equal(t, "default", r.Unplaceable[0].NodePool)
	assert.Contains(t, r.Unplaceable[0].Why, "did not tolerate example.com/special-taint")
	assert.NotEmpty(t, r.Batches, "the batches it was offered in")
	text, err := fleetwright(t, s, "why", "pod", "default/intolerant")
	require.NoError(t, err)
	t.Logf("fleetwright why pod default/intolerant:\n%s", text)
	assert.Contains(t, text, "nodepool default: did not tolerate example.com/special-taint")
	assert.Empty(t, s.NodeClaims(t), "no capacity for a pod no pool takes")
}
