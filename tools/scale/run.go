package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/tools/awsemu"
	emuclient "github.com/fleetwright/fleetwright/tools/awsemu/client"
)

// Target is the running stack a scale run measures.
type Target struct {
	Kube   kubernetes.Interface // the harness's own client, sized for bulk creates
	Client client.Client        // knows Karpenter's types
	// Emu and NATSURL are Fleetwright's stack's; nil and empty when another autoscaler (the
	// peer run's Karpenter) makes the nodes, which then are not counted as instances.
	Emu     *emuclient.Client
	NATSURL string
	// Admin is each service's admin base URL (http://host:port), for /metrics.
	Admin map[string]string
}

// Options are one run's settings.
type Options struct {
	Pods      int
	Mix       Mix
	Namespace string
	Floor     bool          // also measure the floor
	Timeout   time.Duration // for the pods to run, each phase
	Workers   int           // pod creates in flight
	Progress  io.Writer     // a line every ProgressEvery while waiting
	Keep      bool          // leave the pods (and so the nodes) in place
	// ProfileDir, if set, receives each service's CPU profile over the first ProfileSeconds of
	// the run and its heap profile at the end (pprof on the admin port).
	ProfileDir     string
	ProfileSeconds int
	// System names the autoscaler measured in the report's last line: "" for Fleetwright.
	System string
}

// ProgressEvery is how often a progress line is printed while waiting.
const ProgressEvery = 2 * time.Second

// Report is what a run measured; durations are from the first pod create.
type Report struct {
	System                                             string
	Pods                                               int
	Created, Pending, Claims, Launched, Ready, Running time.Duration
	ClaimCount, InstanceCount, NodeCount               int
	Floor                                              time.Duration
	FloorNodes                                         int
	// APICalls is each service's Kubernetes API requests during the run, by "verb resource".
	APICalls map[string]map[string]float64
	// NATSMessages and NATSBytes were stored in the work streams during the run.
	NATSMessages, NATSBytes uint64
	PeakRSSMB, CPUSeconds   map[string]float64
	UtilCPU, UtilMemory     float64 // requested over allocatable on the run's nodes
	// Problems are broken expectations: pods not Running, claims without one node each.
	Problems []string
}

// Run makes opts.Pods pods pending at once on the target and measures until they all run,
// then (with opts.Floor) the same pods on the same nodes made beforehand.
func Run(ctx context.Context, tg Target, opts Options) (*Report, error) {
	if opts.Workers <= 0 {
		opts.Workers = 32
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	r := &Report{Pods: opts.Pods, System: opts.System}
	if err := ensureNamespace(ctx, tg.Kube, opts.Namespace); err != nil {
		return nil, err
	}
	beforeMetrics := scrapeAll(ctx, tg.Admin)
	beforeNATS, err := natsTotals(ctx, tg.NATSURL)
	if err != nil {
		return nil, err
	}
	peaks := newSampler(tg.Admin)
	stopSampling := peaks.run(ctx, 500*time.Millisecond)
	if opts.ProfileDir != "" {
		prof, err := startProfiles(ctx, opts.ProfileDir, opts.ProfileSeconds, tg.Admin)
		if err != nil {
			stopSampling()
			return nil, err
		}
		defer prof.finish(ctx, opts.Progress)
	}

	pods := opts.Mix.Pods(opts.Namespace, opts.Pods)
	w, err := watchPods(ctx, tg.Kube, opts.Namespace)
	if err != nil {
		stopSampling()
		return nil, err
	}
	start := time.Now()
	fmt.Fprintf(opts.Progress, "scale: creating %d pods (%s) in namespace %s\n", len(pods), opts.Mix, opts.Namespace)
	if err := createPods(ctx, tg.Kube, pods, opts.Workers); err != nil {
		stopSampling()
		return nil, err
	}
	r.Created = time.Since(start)
	fmt.Fprintf(opts.Progress, "scale: %d pods created in %.1f s\n", len(pods), r.Created.Seconds())
	err = waitAll(ctx, opts, start, func() (string, bool) {
		claims, nodes, nominated := countSince(ctx, tg.Client, start)
		st := w.states(nominated)
		if r.Pending == 0 && st.pendingOrPlaced == opts.Pods {
			r.Pending = time.Since(start)
		}
		line := fmt.Sprintf("pending %d, nominated %d, bound %d, running %d/%d; nodeclaims %d, nodes ready %d",
			st.pending, st.nominated, st.bound, st.running, opts.Pods, claims, nodes)
		if st.running == opts.Pods {
			r.Running = time.Since(start)
			return line, true
		}
		return line, false
	})
	stopSampling()
	w.stop()
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		r.Problems = append(r.Problems, stuckPods(ctx, tg, opts.Namespace)...)
	}
	afterMetrics := scrapeAll(ctx, tg.Admin)
	afterNATS, err := natsTotals(ctx, tg.NATSURL)
	if err != nil {
		return nil, err
	}
	r.NATSMessages, r.NATSBytes = afterNATS.msgs-beforeNATS.msgs, afterNATS.bytes-beforeNATS.bytes
	r.APICalls = apiCallsDelta(beforeMetrics, afterMetrics)
	r.CPUSeconds = map[string]float64{}
	for svc := range tg.Admin {
		r.CPUSeconds[svc] = gauge(afterMetrics[svc], "process_cpu_seconds_total") - gauge(beforeMetrics[svc], "process_cpu_seconds_total")
	}
	r.PeakRSSMB = peaks.peakMB()
	shapes, placed, err := r.fleet(ctx, tg, start, opts.Namespace)
	if err != nil {
		return nil, err
	}
	if opts.Floor && r.Running > 0 {
		if r.Floor, err = floor(ctx, tg, opts, shapes, placed); err != nil {
			return nil, fmt.Errorf("measuring the floor: %w", err)
		}
		r.FloorNodes = len(shapes)
	}
	if !opts.Keep {
		// Thousands of pods can outlast one request's time on the API server: try again, and a
		// cleanup that still fails costs the report nothing.
		var err error
		for try := 0; try < 3; try++ {
			if err = tg.Kube.CoreV1().Pods(opts.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptrInt64(0)}, metav1.ListOptions{}); err == nil {
				break
			}
		}
		if err != nil {
			fmt.Fprintf(opts.Progress, "scale: warning: the run's pods are left in namespace %s (kubectl delete pods --all -n %s): %v\n", opts.Namespace, opts.Namespace, err)
		}
	}
	return r, nil
}

// fleet reads what the run launched — claims, instances, nodes — checks one node per claim, and
// computes the utilisation; it returns the nodes' shapes and where each pod ran, for the floor.
func (r *Report) fleet(ctx context.Context, tg Target, start time.Time, namespace string) (shapes []corev1.Node, placed map[string]string, err error) {
	var claims karpv1.NodeClaimList
	if err := tg.Client.List(ctx, &claims); err != nil {
		return nil, nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	ours := map[string]string{} // claim → node
	for _, c := range claims.Items {
		if c.CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
			continue
		}
		ours[c.Name] = c.Status.NodeName
		r.Claims = max(r.Claims, c.CreationTimestamp.Sub(start))
	}
	r.ClaimCount = len(ours)
	var insts []awsemu.InstanceInfo
	if tg.Emu != nil {
		if insts, err = tg.Emu.Instances(ctx); err != nil {
			return nil, nil, fmt.Errorf("listing instances: %w", err)
		}
	}
	for _, i := range insts {
		if i.LaunchTime.Before(start) || (i.State != "running" && i.State != "pending") {
			continue
		}
		r.InstanceCount++
		r.Launched = max(r.Launched, i.LaunchTime.Sub(start))
	}
	var nodes corev1.NodeList
	if err := tg.Client.List(ctx, &nodes, client.HasLabels{karpv1.NodePoolLabelKey}); err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	byName := map[string]corev1.Node{}
	for _, n := range nodes.Items {
		if n.CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
			continue
		}
		byName[n.Name] = n
		shapes = append(shapes, n)
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				r.Ready = max(r.Ready, c.LastTransitionTime.Sub(start))
			}
		}
	}
	r.NodeCount = len(byName)
	seen := map[string]string{}
	for claim, node := range ours {
		switch {
		case node == "":
			r.Problems = append(r.Problems, fmt.Sprintf("nodeclaim %s has no node", claim))
		case seen[node] != "":
			r.Problems = append(r.Problems, fmt.Sprintf("node %s is claimed by %s and %s", node, seen[node], claim))
		}
		seen[node] = claim
	}
	if r.NodeCount != r.ClaimCount || (tg.Emu != nil && r.InstanceCount != r.ClaimCount) {
		r.Problems = append(r.Problems, fmt.Sprintf("%d nodeclaims, %d instances, %d nodes: want one of each per claim", r.ClaimCount, r.InstanceCount, r.NodeCount))
	}
	pods, err := tg.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	var reqCPU, reqMem, allocCPU, allocMem int64
	placed = map[string]string{}
	for _, p := range pods.Items {
		placed[p.Name] = p.Spec.NodeName
		if _, ok := byName[p.Spec.NodeName]; !ok {
			continue
		}
		for _, c := range p.Spec.Containers {
			reqCPU += c.Resources.Requests.Cpu().MilliValue()
			reqMem += c.Resources.Requests.Memory().Value()
		}
	}
	for _, n := range byName {
		allocCPU += n.Status.Allocatable.Cpu().MilliValue()
		allocMem += n.Status.Allocatable.Memory().Value()
	}
	if allocCPU > 0 && allocMem > 0 {
		r.UtilCPU, r.UtilMemory = float64(reqCPU)/float64(allocCPU), float64(reqMem)/float64(allocMem)
	}
	return shapes, placed, nil
}

func ptrInt64(v int64) *int64 { return &v }

func ensureNamespace(ctx context.Context, kube kubernetes.Interface, name string) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	pods, err := kube.CoreV1().Pods(name).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return fmt.Errorf("listing pods in %s: %w", name, err)
	}
	if len(pods.Items) > 0 {
		return fmt.Errorf("namespace %s already has pods: delete them (kubectl delete pods --all -n %s) or pick another --namespace", name, name)
	}
	return nil
}

// createPods creates every pod with workers in parallel; the first error stops the rest.
func createPods(ctx context.Context, kube kubernetes.Interface, pods []*corev1.Pod, workers int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(pods) || ctx.Err() != nil {
					return
				}
				if _, err := kube.CoreV1().Pods(pods[i].Namespace).Create(ctx, pods[i], metav1.CreateOptions{}); err != nil {
					cancel(fmt.Errorf("creating pod %s: %w", pods[i].Name, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// waitAll calls check every 250 ms until it says done, printing its line every ProgressEvery.
func waitAll(ctx context.Context, opts Options, start time.Time, check func() (string, bool)) error {
	deadline := time.Now().Add(opts.Timeout)
	lastPrint := time.Time{}
	for {
		line, done := check()
		if done || time.Since(lastPrint) >= ProgressEvery {
			fmt.Fprintf(opts.Progress, "  %6.1f s  %s\n", time.Since(start).Seconds(), line)
			lastPrint = time.Now()
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every pod Running after %s: %s", opts.Timeout, line)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// countSince counts the claims and Ready nodes made since start (a cheap list each: hundreds),
// and collects the UIDs of the pods the claims record nominations of.
func countSince(ctx context.Context, c client.Client, start time.Time) (claims, ready int, nominated map[string]bool) {
	nominated = map[string]bool{}
	var cl karpv1.NodeClaimList
	if c.List(ctx, &cl) == nil {
		for _, x := range cl.Items {
			if !x.CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
				claims++
			}
			for _, uid := range podproj.NominatedUIDs(x.Annotations) {
				nominated[uid] = true
			}
		}
	}
	var nl corev1.NodeList
	if c.List(ctx, &nl, client.HasLabels{karpv1.NodePoolLabelKey}) == nil {
		for _, n := range nl.Items {
			if n.CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
				continue
			}
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
	}
	return claims, ready, nominated
}

// stuckPods describes each of the run's pods that is not Running, for a run that timed out: its
// shape, the claim it is nominated to and that claim's node, and the events the pod got, so a
// failure says which side (kube-scheduler or the planner) disagreed and why.
func stuckPods(ctx context.Context, tg Target, namespace string) []string {
	claimOf := map[string]string{}
	var cl karpv1.NodeClaimList
	if err := tg.Client.List(ctx, &cl); err != nil {
		return []string{fmt.Sprintf("listing nodeclaims: %v", err)}
	}
	for _, c := range cl.Items {
		for _, uid := range podproj.NominatedUIDs(c.Annotations) {
			claimOf[uid] += fmt.Sprintf(" %s (node %q, deleting %t)", c.Name, c.Status.NodeName, c.DeletionTimestamp != nil)
		}
	}
	pods, err := tg.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{fmt.Sprintf("listing pods: %v", err)}
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			continue
		}
		line := fmt.Sprintf("pod %s (%s) not Running: node %q, nominated to%s", p.Name, p.Labels[ShapeLabel], p.Spec.NodeName, or(claimOf[string(p.UID)], " no claim"))
		evs, err := tg.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
		if err == nil {
			sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].LastTimestamp.Before(&evs.Items[j].LastTimestamp) })
			for _, e := range evs.Items {
				line += fmt.Sprintf("\n    %s %s x%d: %s", e.LastTimestamp.Format(time.TimeOnly), e.Reason, max(e.Count, 1), e.Message)
			}
		}
		out = append(out, line)
	}
	return out
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// podWatch counts the run's pods by state from an informer (listing thousands of pods every
// 250 ms would load the API server it measures).
type podWatch struct {
	lister func() []*corev1.Pod
	stop   func()
}

type podStates struct{ pending, nominated, bound, running, pendingOrPlaced int }

func watchPods(ctx context.Context, kube kubernetes.Interface, namespace string) (*podWatch, error) {
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(namespace))
	inf := f.Core().V1().Pods()
	lister := inf.Lister()
	ictx, cancel := context.WithCancel(ctx)
	f.Start(ictx.Done())
	if !cache.WaitForCacheSync(ictx.Done(), inf.Informer().HasSynced) {
		cancel()
		return nil, errors.New("pod informer did not sync")
	}
	return &podWatch{stop: cancel, lister: func() []*corev1.Pod {
		pods, _ := lister.List(labels.Everything())
		return pods
	}}, nil
}

// states counts the pods by state; nominated holds the UIDs of pods nominated to a NodeClaim.
func (w *podWatch) states(nominated map[string]bool) podStates {
	var s podStates
	for _, p := range w.lister() {
		switch {
		case p.Status.Phase == corev1.PodRunning:
			s.running++
			s.pendingOrPlaced++
		case p.Spec.NodeName != "":
			s.bound++
			s.pendingOrPlaced++
		case nominated[string(p.UID)] || p.Status.NominatedNodeName != "":
			s.nominated++
			s.pendingOrPlaced++
		default:
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					s.pending++
					s.pendingOrPlaced++
				}
			}
		}
	}
	return s
}

// metrics are one scrape per service.
type metrics map[string]map[string]*dto.MetricFamily

func scrapeAll(ctx context.Context, admin map[string]string) metrics {
	out := metrics{}
	for svc, base := range admin {
		out[svc] = scrape(ctx, base)
	}
	return out
}

// scrape reads a /metrics page; a service that does not answer gives nothing (it is reported
// as zero, not as a failed run).
func scrape(ctx context.Context, base string) map[string]*dto.MetricFamily {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	return fams
}

// gauge is the sum of a family's samples (a counter's or gauge's value).
func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		}
	}
	return total
}

// apiCallsDelta is fleetwright_kube_requests_total after minus before, by service and
// "verb resource"; for Karpenter, which has none, the count of its client-go latency histogram
// (client_go_request_duration_seconds, by verb, kind and subresource: awslabs/operatorpkg).
func apiCallsDelta(before, after metrics) map[string]map[string]float64 {
	count := func(fams map[string]*dto.MetricFamily) map[string]float64 {
		out := map[string]float64{}
		f := fams["fleetwright_kube_requests_total"]
		if f == nil {
			if h := fams["client_go_request_duration_seconds"]; h != nil {
				for _, m := range h.GetMetric() {
					l := map[string]string{}
					for _, p := range m.GetLabel() {
						l[p.GetName()] = strings.ToLower(p.GetValue())
					}
					res := l["kind"]
					if l["subresource"] != "" {
						res += "/" + l["subresource"]
					}
					out[l["verb"]+" "+res] += float64(m.GetHistogram().GetSampleCount())
				}
			}
			return out
		}
		for _, m := range f.GetMetric() {
			var verb, res string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "verb":
					verb = l.GetValue()
				case "resource":
					res = l.GetValue()
				}
			}
			out[verb+" "+res] += m.GetCounter().GetValue()
		}
		return out
	}
	out := map[string]map[string]float64{}
	for svc := range after {
		b, a := count(before[svc]), count(after[svc])
		out[svc] = map[string]float64{}
		for k, v := range a {
			if d := v - b[k]; d > 0 {
				out[svc][k] = d
			}
		}
	}
	return out
}

// sampler follows each service's resident memory, for its peak.
type sampler struct {
	admin map[string]string
	mu    sync.Mutex
	peak  map[string]float64
}

func newSampler(admin map[string]string) *sampler {
	return &sampler{admin: admin, peak: map[string]float64{}}
}

func (s *sampler) run(ctx context.Context, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			for svc, base := range s.admin {
				rss := gauge(scrape(ctx, base), "process_resident_memory_bytes")
				s.mu.Lock()
				s.peak[svc] = max(s.peak[svc], rss)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(every):
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (s *sampler) peakMB() map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]float64{}
	for k, v := range s.peak {
		out[k] = v / (1 << 20)
	}
	return out
}

type natsCount struct{ msgs, bytes uint64 }

// natsTotals sums the work streams' last sequence and bytes (the audit stream, a copy, is left
// out).
func natsTotals(ctx context.Context, url string) (natsCount, error) {
	if url == "" {
		return natsCount{}, nil
	}
	nc, err := nats.Connect(url, nats.Name("fleetwright-scale"))
	if err != nil {
		return natsCount{}, fmt.Errorf("connecting to nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return natsCount{}, err
	}
	var out natsCount
	streams := js.ListStreams(ctx)
	for info := range streams.Info() {
		if strings.Contains(info.Config.Name, "AUDIT") {
			continue
		}
		out.msgs += info.State.LastSeq
		out.bytes += info.State.Bytes
	}
	if err := streams.Err(); err != nil {
		return natsCount{}, fmt.Errorf("listing streams: %w", err)
	}
	return out, nil
}

// Summary is the report for a person: the timeline, the API calls, the bus, the services.
func (r *Report) Summary(w io.Writer) {
	fmt.Fprintf(w, "\ntimeline (from the first pod create):\n")
	for _, row := range []struct {
		what string
		at   time.Duration
	}{{"all pods created", r.Created}, {"all pods pending (or placed)", r.Pending}, {"last nodeclaim created", r.Claims},
		{"last instance launched", r.Launched}, {"last node ready", r.Ready}, {"all pods Running", r.Running}} {
		fmt.Fprintf(w, "  %-30s %7.1f s\n", row.what, row.at.Seconds())
	}
	fmt.Fprintf(w, "fleet: %d nodeclaims, %d instances, %d nodes; utilisation cpu %.2f, memory %.2f\n",
		r.ClaimCount, r.InstanceCount, r.NodeCount, r.UtilCPU, r.UtilMemory)
	if r.Floor > 0 {
		fmt.Fprintf(w, "floor: the same pods on %d nodes made beforehand Running in %.1f s\n", r.FloorNodes, r.Floor.Seconds())
	}
	fmt.Fprintf(w, "kubernetes API calls during the run:\n")
	for _, svc := range sortedKeys(r.APICalls) {
		calls := r.APICalls[svc]
		total := 0.0
		var parts []string
		for _, k := range sortedKeys(calls) {
			total += calls[k]
			parts = append(parts, fmt.Sprintf("%s=%.0f", k, calls[k]))
		}
		fmt.Fprintf(w, "  %-12s %6.0f  %s\n", svc, total, strings.Join(parts, ", "))
	}
	if r.System == "" {
		fmt.Fprintf(w, "nats: %d messages, %.1f MB stored in the work streams\n", r.NATSMessages, float64(r.NATSBytes)/(1<<20))
	}
	fmt.Fprintf(w, "services (peak RSS, CPU seconds):\n")
	for _, svc := range sortedKeys(r.PeakRSSMB) {
		fmt.Fprintf(w, "  %-12s %6.0f MB  %6.1f s\n", svc, r.PeakRSSMB[svc], r.CPUSeconds[svc])
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "PROBLEM: %s\n", p)
	}
	fmt.Fprintln(w, r.Line())
}

// Line is the report's last line.
func (r *Report) Line() string {
	floor, ratio := "floor not measured", ""
	if r.Floor > 0 {
		floor = fmt.Sprintf("floor %.1f s", r.Floor.Seconds())
		ratio = fmt.Sprintf(", ratio %.2f", r.Running.Seconds()/r.Floor.Seconds())
	}
	var rss []string
	for _, svc := range sortedKeys(r.PeakRSSMB) {
		rss = append(rss, fmt.Sprintf("%s=%.0fMB", svc, r.PeakRSSMB[svc]))
	}
	running := fmt.Sprintf("%.1f s", r.Running.Seconds())
	if r.Running == 0 {
		running = "NOT all Running"
	}
	name := "scale"
	if r.System != "" {
		name += " (" + r.System + ")"
	}
	return fmt.Sprintf("%s: %d pods Running in %s (%s%s), %d nodes, peak RSS %s", name, r.Pods, running, floor, ratio, r.NodeCount, strings.Join(rss, " "))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
