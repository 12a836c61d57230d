package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/tools/awsemu"
	emuclient "github.com/fleetwright/fleetwright/tools/awsemu/client"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// Namespace holds the soak's workloads; its pods are the ones the final check wants Running.
const Namespace = "soak"

// Fault kinds, as counted in the report.
const (
	FaultScale     = "scale"
	FaultInterrupt = "spot-interruption"
	FaultKill      = "kill"
)

// Target is the stack a soak runs against: clients for the cluster and the emulator, and a way
// to crash one service.
type Target struct {
	Client client.Client
	Emu    *emuclient.Client
	// Services may be killed.
	Services []string
	// Kill ends one replica of the service with SIGKILL — the leader where the service has
	// one, else the replica pick chooses (pick modulo the replicas) — and returns once it runs
	// again (restarted by the soak or by the stack's supervisor, as a container would be),
	// saying what it did.
	Kill func(ctx context.Context, name string, pick uint64) (string, error)
	// GCWindow is how old an instance without a NodeClaim may be before it counts as orphaned.
	GCWindow time.Duration
}

// Options are a soak run's knobs.
type Options struct {
	Duration time.Duration // injecting faults for this long
	Settle   time.Duration // then waiting at most this long for the final invariants
	Seed     uint64
	// TickMin and TickMax bound the random pause between two injections.
	TickMin, TickMax time.Duration
	Progress         time.Duration // how often a progress line is printed
	Out              io.Writer
}

// Report is what a soak injected and found.
type Report struct {
	Seed         uint64
	Elapsed      time.Duration
	Faults       map[string]int // by kind
	Kills        map[string]int // by service
	Skipped      int            // ticks that found nothing to inject (no instance to interrupt)
	Checks       int            // invariant checks run
	CheckErrors  int            // checks that could not read the cluster or the emulator
	Violations   []Found        // distinct violations, first seen first
	FinalOK      bool           // the final (settled) check found nothing
	FinalWaited  time.Duration
	InjectErrors []string
}

// Found is one distinct violation and how often the checks saw it.
type Found struct {
	e2e.Violation
	First time.Duration // after the start
	Seen  int
	Final bool // seen by the final check
}

// Total is every fault injected.
func (r *Report) Total() int {
	n := 0
	for _, c := range r.Faults {
		n += c
	}
	return n
}

// workload is one Deployment the soak scales.
type workload struct {
	name string
	cpu  string
	max  int32
	pdb  bool // covered by a PodDisruptionBudget (maxUnavailable 1)
}

var workloads = []workload{
	{name: "soak-a", cpu: "1", max: 6, pdb: true},
	{name: "soak-b", cpu: "500m", max: 8},
	{name: "soak-c", cpu: "1500m", max: 4},
}

// soak is one run's state; the injector and the checker share it under mu.
type soak struct {
	t     Target
	opt   Options
	rng   *rand.Rand
	start time.Time

	mu          sync.Mutex
	interrupted map[string]bool // instances already sent a warning
	report      Report
	seen        map[string]int // violation → index in report.Violations
	lastView    view
}

// view is what the last check saw, for the progress line.
type view struct {
	nodes, running, pending, claims int
}

// Run sets up the workloads, injects faults for opt.Duration while checking the invariants
// every second, then stops injecting and waits up to opt.Settle for the final check to pass.
func Run(ctx context.Context, t Target, opt Options) (*Report, error) {
	if opt.Out == nil {
		opt.Out = io.Discard
	}
	s := newSoak(t, opt)
	if err := s.setup(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(opt.Out, "soak: seed %d, injecting for %s (replay with --seed %d)\n", opt.Seed, opt.Duration, opt.Seed)
	s.start = time.Now()
	runCtx, stop := context.WithTimeout(ctx, opt.Duration)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.checkLoop(runCtx) }()
	go func() { defer wg.Done(); s.progressLoop(runCtx) }()
	s.injectLoop(runCtx)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return &s.report, err
	}
	s.settle(ctx)
	s.report.Elapsed = time.Since(s.start)
	return &s.report, nil
}

func newSoak(t Target, opt Options) *soak {
	return &soak{t: t, opt: opt, rng: rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x5eed)), seen: map[string]int{}, interrupted: map[string]bool{},
		report: Report{Seed: opt.Seed, Faults: map[string]int{}, Kills: map[string]int{}}}
}

// setup creates the namespace, the soak's NodePool and EC2NodeClass, the Deployments (each
// starting at one replica) and the PDB.
func (s *soak) setup(ctx context.Context) error {
	c := s.t.Client
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}},
		nodeClass(), nodePool(),
	}
	for _, w := range workloads {
		objs = append(objs, deployment(w))
		if w.pdb {
			one := intstr.FromInt32(1)
			objs = append(objs, &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: Namespace},
				Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one,
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.name}}},
			})
		}
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

func nodeClass() *ec2v1.EC2NodeClass {
	sel := []ec2v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo-cluster"}}}
	return &ec2v1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "soak"},
		Spec: ec2v1.EC2NodeClassSpec{
			AMIFamily:                  ptr("AL2023"),
			AMISelectorTerms:           []ec2v1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        sel,
			SecurityGroupSelectorTerms: []ec2v1.SecurityGroupSelectorTerm{{Tags: sel[0].Tags}},
			Role:                       "KarpenterNodeRole-demo-cluster",
		},
	}
}

// nodePool allows spot (so interruptions have targets) and on-demand, small Graviton nodes,
// consolidated 15 s after they become empty or underutilized, so scale-downs churn nodes too.
func nodePool() *karpv1.NodePool {
	req := func(key string, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	after := karpv1.MustParseNillableDuration("15s")
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "soak"},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "soak"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
					req("karpenter.k8s.aws/instance-family", "t4g"),
					req("karpenter.k8s.aws/instance-cpu", "2", "4"),
					req(karpv1.CapacityTypeLabelKey, "spot", "on-demand"),
					req(corev1.LabelTopologyZone, "us-east-1a"),
					req(corev1.LabelArchStable, "arm64"),
				},
			}},
			Disruption: karpv1.Disruption{ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: after},
			Limits:     karpv1.Limits{corev1.ResourceCPU: resource.MustParse("60")},
		},
	}
}

func deployment(w workload) *appsv1.Deployment {
	labels := map[string]string{"app": w.name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr(int64(0)),
					NodeSelector:                  map[string]string{karpv1.NodePoolLabelKey: "soak"},
					Containers: []corev1.Container{{Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(w.cpu)}}}},
				},
			},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// injectLoop injects one fault per tick until ctx ends: half the ticks scale a Deployment, a
// quarter interrupt a spot instance, a quarter kill a service.
func (s *soak) injectLoop(ctx context.Context) {
	for {
		d := s.draw()
		select {
		case <-ctx.Done():
			return
		case <-time.After(d.pause):
		}
		var kind, what string
		var err error
		switch {
		case d.kind < 2:
			kind = FaultScale
			what, err = s.scale(ctx, d)
		case d.kind == 2:
			kind = FaultInterrupt
			what, err = s.interrupt(ctx, d)
		default:
			kind = FaultKill
			name := s.t.Services[d.service]
			what, err = s.t.Kill(ctx, name, d.n)
			if err == nil {
				s.mu.Lock()
				s.report.Kills[name]++
				s.mu.Unlock()
			}
		}
		if ctx.Err() != nil && err != nil {
			return // the run ended mid-injection
		}
		s.mu.Lock()
		switch {
		case err != nil:
			s.report.InjectErrors = append(s.report.InjectErrors, fmt.Sprintf("%s: %v", kind, err))
			fmt.Fprintf(s.opt.Out, "%s  inject %-17s FAILED: %v\n", s.stamp(), kind, err)
		case what == "":
			s.report.Skipped++
		default:
			s.report.Faults[kind]++
			fmt.Fprintf(s.opt.Out, "%s  inject %-17s %s\n", s.stamp(), kind, what)
		}
		s.mu.Unlock()
	}
}

// draw is one tick's random choices, all drawn up front whatever the tick then does, so a
// seed gives the same sequence of choices however the stack behaves.
type draw struct {
	pause    time.Duration
	kind     int // 0, 1: scale; 2: interrupt; 3: kill
	workload int
	n        uint64 // replicas to scale to, which instance to interrupt, or which replica to kill
	down     bool   // the PDB'd workload steps down rather than up
	service  int
}

func (s *soak) draw() draw {
	return draw{
		pause:    s.opt.TickMin + time.Duration(s.rng.Int64N(int64(s.opt.TickMax-s.opt.TickMin)+1)),
		kind:     s.rng.IntN(4),
		workload: s.rng.IntN(len(workloads)),
		n:        s.rng.Uint64(),
		down:     s.rng.IntN(2) == 0,
		service:  s.rng.IntN(len(s.t.Services)),
	}
}

func (s *soak) stamp() string {
	return fmt.Sprintf("[%6.1fs]", time.Since(s.start).Seconds())
}

// scale moves one Deployment's replicas. The one under a PDB moves by one at a time and only
// down when all its pods are ready: a scale-down is not a disruption its budget governs, so a
// bigger step would show as a broken budget that no node autoscaler caused.
func (s *soak) scale(ctx context.Context, dr draw) (string, error) {
	w := workloads[dr.workload]
	var d appsv1.Deployment
	if err := s.t.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: w.name}, &d); err != nil {
		return "", fmt.Errorf("reading deployment %s: %w", w.name, err)
	}
	from := *d.Spec.Replicas
	to := int32(dr.n % uint64(w.max+1))
	if w.pdb {
		to = from + 1
		if from > 0 && (from == w.max || dr.down) && d.Status.ReadyReplicas == from && d.Status.Replicas == from {
			to = from - 1
		}
		to = min(to, w.max)
	}
	if to == from {
		to = (from + 1) % (w.max + 1)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &to
	if err := s.t.Client.Patch(ctx, &d, patch); err != nil {
		return "", fmt.Errorf("scaling %s: %w", w.name, err)
	}
	return fmt.Sprintf("%s %d → %d", w.name, from, to), nil
}

// interrupt sends a spot interruption for a random running spot instance of the cluster not
// warned before (a drain held by the PDB can keep one running for its two minutes); "" when
// there is none.
func (s *soak) interrupt(ctx context.Context, dr draw) (string, error) {
	insts, err := s.t.Emu.Instances(ctx)
	if err != nil {
		return "", fmt.Errorf("listing instances: %w", err)
	}
	var ids []string
	for _, i := range insts {
		if i.State == "running" && i.CapacityType == "spot" && hasTag(i.Tags, ec2v1.TagNodeClaim) && !s.interrupted[i.ID] {
			ids = append(ids, i.ID)
		}
	}
	if len(ids) == 0 {
		return "", nil
	}
	sort.Strings(ids)
	id := ids[dr.n%uint64(len(ids))]
	if err := s.t.Emu.Interrupt(ctx, "spot-interruption", id); err != nil {
		return "", fmt.Errorf("interrupting %s: %w", id, err)
	}
	s.interrupted[id] = true
	return id, nil
}

// checkLoop runs the invariants every second until ctx ends.
func (s *soak) checkLoop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		_, _ = s.check(ctx, false) // a failed check is counted and printed
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// check runs the invariants once and returns the violations; a running check (not final)
// records them, the settle records what the last final check still finds.
func (s *soak) check(ctx context.Context, final bool) ([]e2e.Violation, error) {
	// A check started before the window ends runs to its end: cut by the window's deadline, its
	// client would fail it early ("rate: Wait would exceed context deadline") and count it as a
	// check that could not read the cluster.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	v, err := e2e.Violations(cctx, s.t.Client, s.t.Emu, e2e.InvariantOptions{
		Namespaces: []string{Namespace}, GCWindow: s.t.GCWindow, Final: final})
	look := s.look(cctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			s.report.CheckErrors++
			fmt.Fprintf(s.opt.Out, "%s  check failed: %v\n", s.stamp(), err)
		}
		return nil, err
	}
	s.report.Checks++
	s.lastView = look
	if !final {
		for _, x := range v {
			s.record(x, false)
		}
	}
	return v, nil
}

// record counts one violation; the first sighting is printed.
func (s *soak) record(v e2e.Violation, final bool) {
	key := v.String()
	if i, ok := s.seen[key]; ok {
		s.report.Violations[i].Seen++
		s.report.Violations[i].Final = s.report.Violations[i].Final || final
		return
	}
	s.seen[key] = len(s.report.Violations)
	s.report.Violations = append(s.report.Violations, Found{Violation: v, First: time.Since(s.start), Seen: 1, Final: final})
	fmt.Fprintf(s.opt.Out, "%s  VIOLATION %s\n", s.stamp(), v)
}

// look counts nodes, claims and the soak's pods for the progress line.
func (s *soak) look(ctx context.Context) view {
	var v view
	var nodes corev1.NodeList
	if s.t.Client.List(ctx, &nodes, client.HasLabels{karpv1.NodePoolLabelKey}) == nil {
		v.nodes = len(nodes.Items)
	}
	var claims karpv1.NodeClaimList
	if s.t.Client.List(ctx, &claims) == nil {
		v.claims = len(claims.Items)
	}
	var pods corev1.PodList
	if s.t.Client.List(ctx, &pods, client.InNamespace(Namespace)) == nil {
		for _, p := range pods.Items {
			switch {
			case p.DeletionTimestamp != nil:
			case p.Status.Phase == corev1.PodRunning:
				v.running++
			case p.Status.Phase == corev1.PodPending:
				v.pending++
			}
		}
	}
	return v
}

func (s *soak) progressLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.opt.Progress):
		}
		s.mu.Lock()
		v := s.lastView
		fmt.Fprintf(s.opt.Out, "%s  progress: %d faults (%s), %d nodes, %d claims, pods %d running / %d pending, %d checks, %d violations\n",
			s.stamp(), s.report.Total(), counts(s.report.Faults), v.nodes, v.claims, v.running, v.pending, s.report.Checks, len(s.report.Violations))
		s.mu.Unlock()
	}
}

// settle waits, injecting nothing, until a final check finds nothing or opt.Settle passes;
// what the last final check still finds is recorded.
func (s *soak) settle(ctx context.Context) {
	fmt.Fprintf(s.opt.Out, "%s  injecting stopped; settling (at most %s) for the final check\n", s.stamp(), s.opt.Settle)
	t0 := time.Now()
	for {
		v, err := s.check(ctx, true)
		if err == nil && len(v) == 0 && ctx.Err() == nil {
			s.report.FinalOK = true
			s.report.FinalWaited = time.Since(t0)
			fmt.Fprintf(s.opt.Out, "%s  final check: no violation (settled in %s)\n", s.stamp(), s.report.FinalWaited.Round(100*time.Millisecond))
			return
		}
		if time.Since(t0) > s.opt.Settle || ctx.Err() != nil {
			s.mu.Lock()
			for _, x := range v {
				s.record(x, true)
			}
			s.mu.Unlock()
			s.report.FinalWaited = time.Since(t0)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func hasTag(tags []awsemu.Tag, key string) bool {
	for _, t := range tags {
		if t.Key == key {
			return true
		}
	}
	return false
}

// Print writes the summary.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\n== soak summary (seed %d, %s) ==\n", r.Seed, r.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "faults injected:      %d (%s)\n", r.Total(), counts(r.Faults))
	fmt.Fprintf(w, "scale events:         %d\n", r.Faults[FaultScale])
	fmt.Fprintf(w, "interruptions:        %d\n", r.Faults[FaultInterrupt])
	fmt.Fprintf(w, "kills:                %d (%s)\n", r.Faults[FaultKill], counts(r.Kills))
	fmt.Fprintf(w, "ticks with no target: %d (no running spot instance left to interrupt)\n", r.Skipped)
	fmt.Fprintf(w, "invariant checks:     %d (%d could not read the cluster)\n", r.Checks, r.CheckErrors)
	if len(r.InjectErrors) > 0 {
		fmt.Fprintf(w, "injections that failed: %d\n", len(r.InjectErrors))
		for _, e := range r.InjectErrors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	final := "passed"
	if !r.FinalOK {
		final = "FAILED"
	}
	fmt.Fprintf(w, "final check:          %s after %s of settling\n", final, r.FinalWaited.Round(time.Second))
	fmt.Fprintf(w, "invariant violations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		when := fmt.Sprintf("first at %s, seen %d time(s)", v.First.Round(100*time.Millisecond), v.Seen)
		if v.Final {
			when += ", still there at the end"
		}
		fmt.Fprintf(w, "  %s (%s)\n", v.Violation, when)
	}
}

// Failed says whether the run found anything wrong.
func (r *Report) Failed() bool { return len(r.Violations) > 0 || !r.FinalOK }
