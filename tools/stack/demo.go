package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
	emuclient "github.com/fleetwright/fleetwright/tools/awsemu/client"
	"github.com/fleetwright/fleetwright/tools/localcluster"
)

// demo brings the stack up and plays the getting-started scenario with the example NodePool
// and EC2NodeClass: inflate 0 → 5, showing pods pending → nodeclaims → instances → nodes
// ready → pods running, then 5 → 0, showing the empty nodes cordoned, terminated and deleted,
// with the time each step took.
func demo(ctx context.Context, cfg config) error {
	if err := up(ctx, cfg); err != nil {
		return err
	}
	kubeconfig := filepath.Join(cfg.clusterDir(), "kubeconfig")
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = karpv1.AddToScheme(scheme)
	// Its client logs through controller-runtime's logger; say nothing rather than warn that none is set.
	crlog.SetLogger(logr.Discard())
	kube, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	kubectl := func(args ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(localcluster.BinDir(), localcluster.Kubectl), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kubectl %v: %w", args, err)
		}
		return nil
	}
	batches, stopTap, err := watchBatches(cfg.natsURL())
	if err != nil {
		return err
	}
	defer stopTap()

	fmt.Println("\n== demo: the getting-started scale-up ==")
	if err := kubectl("apply", "-f", "deploy/examples/v1/default.yaml", "-f", "deploy/examples/inflate.yaml"); err != nil {
		return err
	}
	start := time.Now()
	if err := kubectl("scale", "deployment", "inflate", "--replicas", "5"); err != nil {
		return err
	}
	timeout := time.Duration(cfg.demoTimeout) * time.Second
	pods := func(pred func(corev1.Pod) bool) int {
		var list corev1.PodList
		if kube.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{"app": "inflate"}) != nil {
			return 0
		}
		n := 0
		for _, p := range list.Items {
			if pred(p) {
				n++
			}
		}
		return n
	}
	claims := func(pred func(karpv1.NodeClaim) bool) (n, total int) {
		var list karpv1.NodeClaimList
		if kube.List(ctx, &list) != nil {
			return 0, 0
		}
		for _, c := range list.Items {
			if pred(c) {
				n++
			}
		}
		return n, len(list.Items)
	}
	steps := []struct {
		what string
		cond func() (string, bool)
	}{
		{"pods pending", func() (string, bool) {
			n := pods(func(p corev1.Pod) bool { return isUnschedulable(p) || p.Spec.NodeName != "" })
			return fmt.Sprintf("%d/5 pods marked unschedulable", n), n == 5
		}},
		{"nodeclaims created", func() (string, bool) {
			n, _ := claims(func(karpv1.NodeClaim) bool { return true })
			return fmt.Sprintf("%d nodeclaim(s)", n), n > 0
		}},
		{"instances launched", func() (string, bool) {
			n, total := claims(func(c karpv1.NodeClaim) bool { return c.Status.ProviderID != "" })
			return fmt.Sprintf("%d/%d launched", n, total), n == total && n > 0
		}},
		{"nodes ready", func() (string, bool) {
			n, total := claims(func(c karpv1.NodeClaim) bool { return c.IsTrue(karpv1.ConditionTypeInitialized) })
			return fmt.Sprintf("%d/%d initialized", n, total), n == total && n > 0
		}},
		{"pods running", func() (string, bool) {
			n := pods(func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
			return fmt.Sprintf("%d/5 running", n), n == 5
		}},
	}
	for _, s := range steps {
		if err := waitStep(ctx, s.what, s.cond, start, timeout, "scale-up"); err != nil {
			return err
		}
	}
	fmt.Printf("\nAll 5 pods Running %.1fs after the scale-up.\n\n", time.Since(start).Seconds())
	_ = kubectl("get", "nodepools")
	fmt.Println()
	_ = kubectl("get", "nodeclaims", "-o", "wide")
	fmt.Println()
	_ = kubectl("get", "nodes", "-L", "karpenter.sh/nodepool,karpenter.sh/capacity-type,node.kubernetes.io/instance-type,topology.kubernetes.io/zone")
	emu := emuclient.New("http://" + awsemuAddr)
	reportLatency(ctx, closeTimes(batches()), emu)
	reportTraces(ctx, cfg.jaegerURL(), batches())

	fmt.Println("\n== demo: consolidation ==")
	fmt.Println("(the example pool waits consolidateAfter: 10m before it consolidates or removes a node; the demo sets 20s)")
	if err := kubectl("patch", "nodepool", "default", "--type", "merge", "-p", `{"spec":{"disruption":{"consolidateAfter":"20s"}}}`); err != nil {
		return err
	}
	if err := consolidation(ctx, kube, kubectl, pods, timeout); err != nil {
		return err
	}

	fmt.Println("\n== demo: the scale-down ==")
	start = time.Now()
	if err := kubectl("scale", "deployment", "inflate", "--replicas", "0"); err != nil {
		return err
	}
	running := func() int {
		insts, err := emu.Instances(ctx)
		if err != nil {
			return -1
		}
		n := 0
		for _, i := range insts {
			if i.State == "running" || i.State == "pending" {
				n++
			}
		}
		return n
	}
	// nodes counts the launched nodes that match pred, and all of them, from one list (two
	// lists a moment apart disagree while nodes are being deleted).
	nodes := func(pred func(corev1.Node) bool) (n, total int) {
		var list corev1.NodeList
		if kube.List(ctx, &list, client.HasLabels{karpv1.NodePoolLabelKey}) != nil {
			return -1, -1
		}
		for _, node := range list.Items {
			if pred(node) {
				n++
			}
		}
		return n, len(list.Items)
	}
	down := []struct {
		what string
		cond func() (string, bool)
	}{
		{"pods gone", func() (string, bool) {
			n := pods(func(corev1.Pod) bool { return true })
			return fmt.Sprintf("%d inflate pod(s) left", n), n == 0
		}},
		{"empty nodes cordoned", func() (string, bool) {
			n, total := nodes(disrupted)
			return fmt.Sprintf("%d/%d node(s) tainted karpenter.sh/disrupted", n, total), total == 0 || n > 0
		}},
		{"instances terminated", func() (string, bool) {
			n := running()
			return fmt.Sprintf("%d instance(s) running", n), n == 0
		}},
		{"nodes and claims gone", func() (string, bool) {
			_, n := nodes(func(corev1.Node) bool { return true })
			c, _ := claims(func(karpv1.NodeClaim) bool { return true })
			return fmt.Sprintf("%d node(s), %d nodeclaim(s)", n, c), n == 0 && c == 0
		}},
	}
	for _, s := range down {
		if err := waitStep(ctx, s.what, s.cond, start, timeout, "scale-down"); err != nil {
			return err
		}
	}
	fmt.Printf("\nEmpty nodes removed %.1fs after the scale-down (20s of it is consolidateAfter; the pool's budget, 10%%, lets them go one at a time).\n", time.Since(start).Seconds())
	fmt.Printf("\nThe stack stays up: `. %s`, then kubectl, or `go run ./tools/fleetwright tap` to watch the bus; `make down` stops it.\n", cfg.envFile())
	return nil
}

func disrupted(n corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return true
		}
	}
	return n.Spec.Unschedulable
}

func waitStep(ctx context.Context, what string, cond func() (string, bool), start time.Time, timeout time.Duration, since string) error {
	t0 := time.Now()
	last := ""
	for {
		msg, ok := cond()
		if msg != last {
			fmt.Printf("  … %s\n", msg)
			last = msg
		}
		if ok {
			fmt.Printf("✓ %-22s +%5.1fs   (%.1fs since %s)\n", what, time.Since(t0).Seconds(), time.Since(start).Seconds(), since)
			return nil
		}
		if time.Since(t0) > timeout {
			return fmt.Errorf("%s: not done after %s (last: %s); see .local/logs", what, timeout, msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watchBatches records each pending-pod batch, from the bus (as the tap sees it): when it
// closed, and its trace.
func watchBatches(url string) (func() []batch, func(), error) {
	nc, err := nats.Connect(url, nats.Name("fleetwright-demo"))
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to nats: %w", err)
	}
	var mu sync.Mutex
	var seen []batch
	_, err = nc.Subscribe("fleetwright.pods.pending", func(m *nats.Msg) {
		var b podsv1.PendingPodBatch
		if proto.Unmarshal(m.Data, &b) == nil {
			// The batch's trace: its traceparent header, version-traceid-spanid-flags.
			parts := strings.Split(m.Header.Get("traceparent"), "-")
			mu.Lock()
			seen = append(seen, batch{closed: b.GetWindowCloseTime().AsTime(), pods: len(b.GetPods())})
			if len(parts) == 4 {
				seen[len(seen)-1].traceID = parts[1]
			}
			mu.Unlock()
		}
	})
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("subscribing to pending batches: %w", err)
	}
	get := func() []batch {
		mu.Lock()
		defer mu.Unlock()
		return append([]batch(nil), seen...)
	}
	return get, nc.Close, nil
}

// batch is one pending-pod batch seen on the bus.
type batch struct {
	closed  time.Time
	pods    int
	traceID string
}

// closeTimes are the times the batches closed.
func closeTimes(bs []batch) []time.Time {
	var out []time.Time
	for _, b := range bs {
		out = append(out, b.closed)
	}
	return out
}

// reportTraces prints a link to each batch's trace in Jaeger, with the services and spans
// Jaeger holds of it: the scale-up from pod-watcher's batch to the launched, registered nodes.
func reportTraces(ctx context.Context, jaegerURL string, bs []batch) {
	fmt.Println("\nThe scale-up's trace in Jaeger, one per pending-pod batch (the UI link, then the HTTP API's JSON):")
	for _, b := range bs {
		if b.traceID == "" {
			fmt.Printf("  batch of %d pod(s): no trace context on the message\n", b.pods)
			continue
		}
		// The services export every few seconds: wait until all four have and no span is
		// still arriving.
		var tr localcluster.Trace
		var err error
		for deadline, seen := time.Now().Add(20*time.Second), -1; ; {
			tr, err = localcluster.JaegerTrace(ctx, jaegerURL, b.traceID)
			if (err == nil && len(tr.Services()) >= 4 && len(tr.Spans) == seen) || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			seen = len(tr.Spans)
			time.Sleep(2 * time.Second)
		}
		what := fmt.Sprintf("%d spans from %s", len(tr.Spans), strings.Join(tr.Services(), ", "))
		if err != nil {
			what = err.Error()
		}
		fmt.Printf("  batch of %d pod(s): %s\n    %s\n    (%s)\n", b.pods, localcluster.TraceURL(jaegerURL, b.traceID),
			strings.TrimRight(jaegerURL, "/")+"/api/traces/"+b.traceID, what)
	}
}

// reportLatency prints, for every CreateFleet call, the time since the batch that led to it
// closed (the latest batch closed before the call), with p50 and p99.
func reportLatency(ctx context.Context, batches []time.Time, emu *emuclient.Client) {
	calls, err := emu.Calls(ctx)
	if err != nil || len(batches) == 0 {
		return
	}
	sort.Slice(batches, func(i, j int) bool { return batches[i].Before(batches[j]) })
	var lat []time.Duration
	for _, c := range calls {
		if c.Action != "CreateFleet" {
			continue
		}
		var closed time.Time
		for _, b := range batches {
			if !b.After(c.Time) {
				closed = b
			}
		}
		if !closed.IsZero() {
			lat = append(lat, c.Time.Sub(closed))
		}
	}
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	fmt.Printf("\nBatch closed → CreateFleet called: %d call(s), p50 %s, p99 %s\n", len(lat), pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond))
}

func isUnschedulable(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// consolidation plays inflate 5 → 9 → 3: the nodes left half used are consolidated (deleted when
// their pods fit elsewhere, or replaced by a cheaper node) and the empty ones removed, and it
// prints what the scheduler decided and why.
func consolidation(ctx context.Context, kube client.Client, kubectl func(...string) error, pods func(func(corev1.Pod) bool) int, timeout time.Duration) error {
	liveNodes := func() (n int, cpus int64) {
		var list corev1.NodeList
		if kube.List(ctx, &list, client.HasLabels{karpv1.NodePoolLabelKey}) != nil {
			return -1, -1
		}
		for _, node := range list.Items {
			if node.DeletionTimestamp == nil && !disrupted(node) {
				n++
				cpus += node.Status.Capacity.Cpu().Value()
			}
		}
		return n, cpus
	}
	running := func(want int) func() (string, bool) {
		return func() (string, bool) {
			n := pods(func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil })
			return fmt.Sprintf("%d/%d pods Running", n, want), n == want
		}
	}
	if err := kubectl("scale", "deployment", "inflate", "--replicas", "9"); err != nil {
		return err
	}
	start := time.Now()
	if err := waitStep(ctx, "9 pods Running", running(9), start, timeout, "the scale-up to 9"); err != nil {
		return err
	}
	n0, cpus0 := liveNodes()
	start = time.Now()
	if err := kubectl("scale", "deployment", "inflate", "--replicas", "3"); err != nil {
		return err
	}
	settled := func() (string, bool) {
		n, cpus := liveNodes()
		var claims karpv1.NodeClaimList
		if kube.List(ctx, &claims) != nil {
			return "listing nodeclaims", false
		}
		deciding := 0
		for _, c := range claims.Items {
			if c.Annotations["fleetwright.io/disruption"] != "" || c.DeletionTimestamp != nil {
				deciding++
			}
		}
		msg, ok := running(3)()
		return fmt.Sprintf("%s; %d node(s), %d vCPUs; %d nodeclaim(s) being disrupted", msg, n, cpus, deciding),
			ok && deciding == 0 && len(claims.Items) == n && cpus <= 6 // what a fresh plan for 3 pods buys
	}
	if err := waitStep(ctx, "consolidated", settled, start, timeout, "the scale-down to 3"); err != nil {
		return err
	}
	n1, cpus1 := liveNodes()
	fmt.Printf("\ninflate 9 → 3: %d node(s), %d vCPUs → %d node(s), %d vCPUs, %.1fs after the scale-down (20s of it is consolidateAfter).\n",
		n0, cpus0, n1, cpus1, time.Since(start).Seconds())
	fmt.Println("\nWhat was decided, and why (events on the NodeClaims):")
	_ = kubectl("get", "events", "-A", "--field-selector", "involvedObject.kind=NodeClaim", "--sort-by", ".lastTimestamp",
		"-o", "custom-columns=REASON:.reason,NODECLAIM:.involvedObject.name,MESSAGE:.message")
	fmt.Println()
	return kubectl("get", "nodes", "-L", "node.kubernetes.io/instance-type,karpenter.sh/capacity-type")
}
