package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/subject"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

// PodReport answers "why is this pod (not) running where it is?".
type PodReport struct {
	Pod       string `json:"pod"`
	UID       string `json:"uid,omitempty"`
	InCluster bool   `json:"inCluster"`
	Phase     string `json:"phase,omitempty"`
	Node      string `json:"node,omitempty"` // bound to
	// Batches the pod-watcher offered it in, oldest first.
	Batches []BatchRef `json:"batches,omitempty"`
	// NodeClaims planned for it (their launch intents name it), and the one it is nominated to.
	NodeClaims  []string `json:"nodeClaims,omitempty"`
	NominatedTo string   `json:"nominatedTo,omitempty"`
	// NominationEnded says why the scheduler ended that nomination before its time, if it did.
	NominationEnded string `json:"nominationEnded,omitempty"`
	// LaunchLoop: the nodes launched for the pod's workload that came up and did not hold it (the
	// scheduler's launch-loop breaker stops launching once there are --max-failed-launches).
	LaunchLoop *LaunchLoopReport `json:"launchLoop,omitempty"`
	// Unplaceable: the scheduler's last word on why no NodePool could take it, per pool.
	Unplaceable []PoolExplanation `json:"unplaceable,omitempty"`
	TraceID     string            `json:"traceID,omitempty"`
	TraceURL    string            `json:"traceURL,omitempty"`
	Timeline    []Event           `json:"timeline,omitempty"`
}

// LaunchLoopReport is the launch-loop record of a pod's workload (podproj.LaunchHistory).
type LaunchLoopReport struct {
	FailedLaunches int    `json:"failedLaunches"`
	LastNodeClaim  string `json:"lastNodeClaim,omitempty"`
	LastMisfit     string `json:"lastMisfit,omitempty"`
}

// BatchRef is one PendingPodBatch a pod was in.
type BatchRef struct {
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	Pods int       `json:"pods"`
}

// PoolExplanation is why one NodePool cannot take the pod; NodePool is "" for a reason that is
// not about one pool (e.g. no NodePool exists).
type PoolExplanation struct {
	NodePool string `json:"nodePool,omitempty"`
	Why      string `json:"why"`
}

func whyPodCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlagSet("why pod", &o, stderr)
	stream := fs.String("stream", "", "stream to read the history from (default: the audit stream if there is one, else the work streams)")
	pos, err := parse(fs, &o, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("why pod takes one NAMESPACE/NAME, got %d arguments", len(pos))
	}
	ns, name, ok := strings.Cut(pos[0], "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return usagef("why pod %s: want NAMESPACE/NAME", pos[0])
	}
	conn, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	kube, err := o.kube()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	r, err := explainPod(ctx, kube, newHistory(conn, *stream), ns, name)
	if err != nil {
		return err
	}
	r.TraceURL = o.traceURL(r.TraceID)
	if o.output == "json" {
		return printJSON(stdout, r)
	}
	printPodReport(stdout, r)
	return nil
}

// claimRecords reads what the NodeClaims record of a pending pod: its latest nomination, and the
// launch-loop record of its workload (nil if no claim was launched for it).
func claimRecords(ctx context.Context, kube client.Client, pod *corev1.Pod) (podproj.PodNomination, *LaunchLoopReport, error) {
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims); err != nil {
		return podproj.PodNomination{}, nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	var latest podproj.PodNomination
	all := make([]*karpv1.NodeClaim, 0, len(claims.Items))
	for i := range claims.Items {
		all = append(all, &claims.Items[i])
		if n, ok := podproj.NominationOn(&claims.Items[i], string(pod.UID)); ok && (latest.Claim == "" || n.Supersedes(latest)) {
			latest = n
		}
	}
	h, ok := podproj.LaunchHistories(all)[podproj.WorkloadOf(pod)]
	if !ok {
		return latest, nil, nil
	}
	return latest, &LaunchLoopReport{FailedLaunches: h.Failed, LastNodeClaim: h.Latest, LastMisfit: h.LatestMisfit}, nil
}

func explainPod(ctx context.Context, kube client.Client, h history, ns, name string) (*PodReport, error) {
	r := &PodReport{Pod: ns + "/" + name}
	var pod corev1.Pod
	if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err == nil {
		r.InCluster, r.UID, r.Phase, r.Node = true, string(pod.UID), string(pod.Status.Phase), pod.Spec.NodeName
		if pod.Spec.NodeName == "" {
			n, loop, err := claimRecords(ctx, kube, &pod)
			if err != nil {
				return nil, err
			}
			r.NominatedTo, r.NominationEnded, r.LaunchLoop = n.Claim, n.Ended, loop
		}
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading pod %s: %w", r.Pod, err)
	}
	p := h.prefix
	msgs, err := h.read(ctx, []string{p.Of(subject.PodsPending), p.Of(subject.LaunchIntents)}, time.Time{})
	if err != nil {
		return nil, err
	}
	same := func(pns, pname, uid string) bool {
		return pns == ns && pname == name && (r.UID == "" || uid == "" || uid == r.UID)
	}
	for _, s := range msgs {
		switch m := s.decode().(type) {
		case *podsv1.PendingPodBatch:
			for _, pp := range m.GetPods() {
				if same(pp.GetNamespace(), pp.GetName(), pp.GetUid()) {
					r.Batches = append(r.Batches, BatchRef{ID: m.GetBatchId(), Time: s.Time.UTC(), Pods: len(m.GetPods())})
					r.event(s.Time, s.Msg.Subject, "offered in batch %s with %d pod(s)", m.GetBatchId(), len(m.GetPods()))
					if r.TraceID == "" {
						r.TraceID = s.traceID()
					}
					break
				}
			}
		case *launchv1.LaunchIntent:
			for _, pp := range m.GetPods() {
				if same(pp.GetNamespace(), pp.GetName(), pp.GetUid()) {
					if !contains(r.NodeClaims, m.GetNodeClaimName()) {
						r.NodeClaims = append(r.NodeClaims, m.GetNodeClaimName())
					}
					r.event(s.Time, s.Msg.Subject, "nodeclaim %s planned for it (nodepool %s)", m.GetNodeClaimName(), m.GetNodePoolName())
					if id := s.traceID(); id != "" {
						r.TraceID = id
					}
					break
				}
			}
		}
	}
	if !r.InCluster && len(r.Batches) == 0 && len(r.NodeClaims) == 0 {
		return nil, fmt.Errorf("no pod %s in the cluster, nor in the history on NATS", r.Pod)
	}
	var evs corev1.EventList
	if err := kube.List(ctx, &evs, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.name", name)}); err != nil {
		return nil, fmt.Errorf("listing events of %s: %w", r.Pod, err)
	}
	var last time.Time
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind != "Pod" || (r.UID != "" && string(e.InvolvedObject.UID) != r.UID) {
			continue
		}
		at := eventTime(e)
		r.event(at, "event/"+or(or(e.Source.Component, e.ReportingController), "kubernetes"), "%s: %s", e.Reason, e.Message)
		// The scheduler's explanation (not kube-scheduler's): "Failed to schedule pod, <reason>".
		if e.Reason == "FailedScheduling" && strings.HasPrefix(e.Message, "Failed to schedule pod, ") && !at.Before(last) {
			last = at
			r.Unplaceable = explanations(strings.TrimPrefix(e.Message, "Failed to schedule pod, "))
		}
	}
	if r.Node != "" {
		r.Unplaceable = nil // it runs: an old explanation no longer holds
	}
	sort.SliceStable(r.Timeline, func(i, j int) bool { return r.Timeline[i].Time.Before(r.Timeline[j].Time) })
	return r, nil
}

func eventTime(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

// explanations splits the scheduler's reason into one line per NodePool: the core writes
// "incompatible with nodepool NAME: WHY", joined with "; " (see pkg/scheduling/explain.go).
func explanations(reason string) []PoolExplanation {
	const marker = "incompatible with nodepool "
	var out []PoolExplanation
	parts := strings.Split(reason, marker)
	if head := strings.TrimSuffix(strings.TrimSpace(parts[0]), ";"); head != "" {
		out = append(out, PoolExplanation{Why: head})
	}
	for _, part := range parts[1:] {
		pool, why, _ := strings.Cut(part, ": ")
		why = strings.TrimSuffix(strings.TrimSpace(why), ";")
		// A reason may end with the pools left out as not ready: "...; nodepool X is not ready: ...".
		if i := strings.Index(why, "; nodepool "); i >= 0 {
			rest := why[i+2:]
			why = why[:i]
			out = append(out, PoolExplanation{NodePool: pool, Why: why})
			for _, nr := range strings.Split(rest, "; ") {
				np, w, _ := strings.Cut(strings.TrimPrefix(nr, "nodepool "), " ")
				out = append(out, PoolExplanation{NodePool: np, Why: w})
			}
			continue
		}
		out = append(out, PoolExplanation{NodePool: pool, Why: why})
	}
	return out
}

func (r *PodReport) event(t time.Time, source, format string, a ...any) {
	r.Timeline = append(r.Timeline, Event{Time: t.UTC(), Source: source, Text: fmt.Sprintf(format, a...)})
}

func printPodReport(w io.Writer, r *PodReport) {
	state := "gone from the cluster"
	if r.InCluster {
		state = r.Phase
		if r.Node != "" {
			state += " on node " + r.Node
		}
	}
	fmt.Fprintf(w, "Pod:           %s (%s)\n", r.Pod, state)
	for i, b := range r.Batches {
		if i == 0 {
			fmt.Fprintf(w, "Batches:\n")
		}
		fmt.Fprintf(w, "  %s  %s (%d pod(s))\n", b.Time.Format(time.RFC3339), b.ID, b.Pods)
	}
	if len(r.Batches) == 0 {
		fmt.Fprintf(w, "Batches:       none stored (not pending while the history was kept)\n")
	}
	if len(r.NodeClaims) > 0 {
		fmt.Fprintf(w, "NodeClaims:    %s\n", strings.Join(r.NodeClaims, ", "))
	}
	if r.NominatedTo != "" {
		fmt.Fprintf(w, "Nominated to:  %s\n", r.NominatedTo)
	}
	if r.NominationEnded != "" {
		fmt.Fprintf(w, "  ended:       %s\n", r.NominationEnded)
	}
	if l := r.LaunchLoop; l != nil && l.FailedLaunches > 0 {
		last := fmt.Sprintf("nodeclaim/%s, launched for it since, has not failed", l.LastNodeClaim)
		if l.LastMisfit != "" {
			last = fmt.Sprintf("the last, nodeclaim/%s: %s", l.LastNodeClaim, l.LastMisfit)
		}
		fmt.Fprintf(w, "Launch loop:   %d node(s) launched for its workload came up and did not hold it; %s\n", l.FailedLaunches, last)
	}
	if len(r.Unplaceable) > 0 {
		fmt.Fprintf(w, "No NodePool can take it:\n")
		for _, e := range r.Unplaceable {
			if e.NodePool == "" {
				fmt.Fprintf(w, "  %s\n", e.Why)
			} else {
				fmt.Fprintf(w, "  nodepool %s: %s\n", e.NodePool, e.Why)
			}
		}
	}
	if r.TraceID != "" {
		fmt.Fprintf(w, "Trace:         %s%s\n", r.TraceID, suffix("  ", r.TraceURL))
	}
	if len(r.Timeline) > 0 {
		fmt.Fprintf(w, "Timeline:\n")
		for _, e := range r.Timeline {
			fmt.Fprintf(w, "  %s  %-32s %s\n", e.Time.Format("15:04:05.000"), e.Source, e.Text)
		}
	}
}
