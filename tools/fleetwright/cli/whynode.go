package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
	nodesv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/nodes/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// NodeReport answers "why is this node here, or why did it go?" (-o json prints it as is).
type NodeReport struct {
	Node      string `json:"node,omitempty"`
	NodeClaim string `json:"nodeClaim,omitempty"`
	NodePool  string `json:"nodePool,omitempty"`
	// InCluster: the Node or NodeClaim still exists in Kubernetes.
	InCluster bool `json:"inCluster"`

	InstanceType    string  `json:"instanceType,omitempty"`
	Zone            string  `json:"zone,omitempty"`
	CapacityType    string  `json:"capacityType,omitempty"`
	InstanceID      string  `json:"instanceID,omitempty"`
	PriceUSDPerHour float64 `json:"priceUSDPerHour,omitempty"`

	// Pods the NodeClaim was launched for (its LaunchIntent), and the batch they came in.
	Pods  []string `json:"pods,omitempty"`
	Batch string   `json:"batch,omitempty"`
	// RunningPods are the pods bound to the node now.
	RunningPods []string `json:"runningPods,omitempty"`
	// Considered are the instance types the scheduler allowed, cheapest first; Chosen why this one.
	Considered  []ConsideredType `json:"considered,omitempty"`
	Chosen      string           `json:"chosen,omitempty"`
	Unavailable []string         `json:"unavailable,omitempty"` // offerings found out of capacity for it

	Created     *time.Time `json:"created,omitempty"`
	Launched    *time.Time `json:"launched,omitempty"`
	Registered  *time.Time `json:"registered,omitempty"`
	Initialized *time.Time `json:"initialized,omitempty"`

	Removal *Removal `json:"removal,omitempty"`
	// Blocked says why the node is not being disrupted (consolidation, drift), newest first.
	Blocked []string `json:"blocked,omitempty"`

	TraceID  string  `json:"traceID,omitempty"`
	TraceURL string  `json:"traceURL,omitempty"`
	Timeline []Event `json:"timeline,omitempty"`

	considered *launchv1.LaunchIntent // the claim's intent, for the price of what was launched
}

// ConsideredType is an instance type a NodeClaim could have been, with its cheapest offering.
type ConsideredType struct {
	Name            string  `json:"name"`
	PriceUSDPerHour float64 `json:"priceUSDPerHour"`
	Offering        string  `json:"offering"` // zone/capacity type of the cheapest
}

// Removal is why and how a node went (or is going).
type Removal struct {
	Reason           string     `json:"reason"` // empty, underutilized, drifted, expired, interrupted, ...
	Why              string     `json:"why,omitempty"`
	Action           string     `json:"action,omitempty"` // delete or replace (disruption decisions)
	SavingsPerHour   float64    `json:"savingsUSDPerHour,omitempty"`
	Replacements     []string   `json:"replacements,omitempty"`
	DecidedAt        *time.Time `json:"decidedAt,omitempty"`
	Requested        *time.Time `json:"terminationRequested,omitempty"`
	Outcome          string     `json:"outcome,omitempty"`
	PodsEvicted      int32      `json:"podsEvicted,omitempty"`
	EvictionRetries  int32      `json:"evictionRetries,omitempty"`
	Drain            string     `json:"drain,omitempty"`
	Completed        *time.Time `json:"completed,omitempty"`
	Error            string     `json:"error,omitempty"`
	InterruptionFrom string     `json:"interruptionEvent,omitempty"`
	// Steps are the decision's steps so far, as recorded on the NodeClaim (decided, tainted,
	// launched, initialized, deleted, abandoned), oldest first.
	Steps []disruption.Step `json:"steps,omitempty"`
}

// Event is one line of a timeline: from the bus (its subject) or Kubernetes (an event).
type Event struct {
	Time   time.Time `json:"time"`
	Source string    `json:"source"`
	Text   string    `json:"text"`
}

func whyNodeCmd(ctx context.Context, kind string, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlagSet("why "+kind, &o, stderr)
	stream := fs.String("stream", "", "stream to read the history from (default: the audit stream if there is one, else the work streams)")
	pos, err := parse(fs, &o, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("why %s takes one name, got %d", kind, len(pos))
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
	r, err := explainNode(ctx, kube, newHistory(conn, *stream), pos[0])
	if err != nil {
		return err
	}
	r.TraceURL = o.traceURL(r.TraceID)
	if o.output == "json" {
		return printJSON(stdout, r)
	}
	printNodeReport(stdout, r)
	return nil
}

// explainNode gathers the report for a node or NodeClaim name from Kubernetes and the history.
func explainNode(ctx context.Context, kube client.Client, h history, name string) (*NodeReport, error) {
	r := &NodeReport{}
	var node corev1.Node
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, &node); err == nil {
		r.Node, r.InCluster = node.Name, true
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading node %s: %w", name, err)
	}
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	var claim *karpv1.NodeClaim
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Name == name || c.Status.NodeName == name || (r.Node != "" && c.Status.ProviderID != "" && c.Status.ProviderID == node.Spec.ProviderID) {
			claim = c
			break
		}
	}
	p := h.prefix
	msgs, err := h.read(ctx, []string{p.StreamSubjects(subject.StreamLaunch), p.StreamSubjects(subject.StreamNodes),
		p.StreamSubjects(subject.StreamTerminations), p.Of(subject.OfferingsUnavailable)}, time.Time{})
	if err != nil {
		return nil, err
	}
	decoded := make([]proto.Message, len(msgs))
	for i, m := range msgs {
		decoded[i] = m.decode()
	}
	if claim != nil {
		r.NodeClaim, r.InCluster = claim.Name, true
		if r.Node == "" {
			r.Node = claim.Status.NodeName
		}
	} else {
		r.NodeClaim = claimFromHistory(decoded, name)
		if r.Node == "" && r.NodeClaim != name {
			r.Node = name
		}
	}
	if r.NodeClaim == "" && !r.InCluster {
		return nil, fmt.Errorf("no node or nodeclaim %q in the cluster, nor in the history on NATS", name)
	}
	for i, m := range decoded {
		r.add(msgs[i], m)
	}
	if claim != nil {
		r.fromClaim(claim)
	}
	if r.Node != "" && r.InCluster {
		if err := r.fromNode(ctx, kube, r.Node); err != nil {
			return nil, err
		}
	}
	if err := r.kubeEvents(ctx, kube); err != nil {
		return nil, err
	}
	r.price()
	sort.SliceStable(r.Timeline, func(i, j int) bool { return r.Timeline[i].Time.Before(r.Timeline[j].Time) })
	return r, nil
}

// claimFromHistory finds the NodeClaim a name refers to: itself if some message names a claim
// so, else the claim of the node of that name.
func claimFromHistory(msgs []proto.Message, name string) string {
	found := ""
	for _, m := range msgs {
		switch m := m.(type) {
		case *launchv1.LaunchIntent:
			if m.GetNodeClaimName() == name {
				return name
			}
		case *launchv1.LaunchResult:
			if m.GetNodeClaimName() == name {
				return name
			}
		case *nodesv1.NodeEvent:
			if m.GetNodeName() == name && m.GetNodeClaimName() != "" {
				found = m.GetNodeClaimName()
			}
		case *terminationv1.TerminationIntent:
			if m.GetNodeName() == name && m.GetNodeClaimName() != "" {
				found = m.GetNodeClaimName()
			}
		case *terminationv1.DisruptionDecision:
			for i, n := range m.GetNodeNames() {
				if n == name && i < len(m.GetNodeClaimNames()) {
					found = m.GetNodeClaimNames()[i]
				}
			}
		}
	}
	return found
}

func ts(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func (r *NodeReport) event(t time.Time, source, format string, a ...any) {
	r.Timeline = append(r.Timeline, Event{Time: t.UTC(), Source: source, Text: fmt.Sprintf(format, a...)})
}

func (r *NodeReport) trace(s stored) {
	if r.TraceID == "" {
		r.TraceID = s.traceID()
	}
}

// add folds one message of the history into the report, if it is about the NodeClaim.
func (r *NodeReport) add(s stored, m proto.Message) {
	claim := r.NodeClaim
	switch m := m.(type) {
	case *launchv1.LaunchIntent:
		if m.GetNodeClaimName() != claim {
			return
		}
		r.trace(s)
		r.NodePool, r.Batch, r.Created = m.GetNodePoolName(), m.GetBatchId(), ts(m.GetCreateTime().AsTime())
		r.Pods = nil
		for _, p := range m.GetPods() {
			r.Pods = append(r.Pods, p.GetNamespace()+"/"+p.GetName())
		}
		r.Considered = nil
		for _, it := range m.GetInstanceTypes() {
			if len(it.GetOfferings()) == 0 {
				continue
			}
			o := it.GetOfferings()[0]
			r.Considered = append(r.Considered, ConsideredType{Name: it.GetName(), PriceUSDPerHour: o.GetPriceUsdPerHour(),
				Offering: o.GetZone() + "/" + capacityType(o.GetCapacityType())})
		}
		r.considered = m
		r.event(s.Time, s.Msg.Subject, "launch intent: %d pod(s) from nodepool %s, %d instance type(s) allowed", len(m.GetPods()), m.GetNodePoolName(), len(m.GetInstanceTypes()))
	case *launchv1.LaunchResult:
		if m.GetNodeClaimName() != claim {
			return
		}
		r.trace(s)
		if m.GetErrorCode() != "" {
			r.event(s.Time, s.Msg.Subject, "launch attempt %d failed: %s: %s", m.GetAttempt(), m.GetErrorCode(), m.GetErrorMessage())
			return
		}
		r.InstanceType, r.Zone, r.CapacityType, r.InstanceID = m.GetInstanceType(), m.GetZone(), capacityType(m.GetCapacityType()), m.GetInstanceId()
		r.Launched = ts(m.GetCompleteTime().AsTime())
		r.event(s.Time, s.Msg.Subject, "launched %s %s in %s (%s)", r.CapacityType, r.InstanceType, r.Zone, r.InstanceID)
	case *launchv1.OfferingUnavailable:
		if m.GetNodeClaimName() != claim {
			return
		}
		u := fmt.Sprintf("%s %s in %s: %s", capacityType(m.GetCapacityType()), m.GetInstanceType(), m.GetZone(), m.GetReason())
		r.Unavailable = append(r.Unavailable, u)
		r.event(s.Time, s.Msg.Subject, "offering unavailable: %s", u)
	case *nodesv1.NodeEvent:
		if m.GetNodeClaimName() != claim {
			return
		}
		if r.Node == "" {
			r.Node = m.GetNodeName()
		}
		at := m.GetEventTime().AsTime()
		switch m.GetKind() {
		case nodesv1.NodeEventKind_NODE_EVENT_KIND_REGISTERED:
			r.Registered = ts(at)
		case nodesv1.NodeEventKind_NODE_EVENT_KIND_INITIALIZED:
			r.Initialized = ts(at)
		}
		r.event(s.Time, s.Msg.Subject, "node %s %s", m.GetNodeName(), enumWord(m.GetKind().String(), "NODE_EVENT_KIND_"))
	case *terminationv1.DisruptionDecision:
		if !contains(m.GetNodeClaimNames(), claim) {
			return
		}
		kind := enumWord(m.GetKind().String(), "DISRUPTION_DECISION_KIND_")
		reason := enumWord(m.GetReason().String(), "TERMINATION_REASON_")
		if m.GetKind() == terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_BLOCKED {
			r.Blocked = append([]string{fmt.Sprintf("%s: %s", reason, m.GetWhy())}, r.Blocked...)
			r.event(s.Time, s.Msg.Subject, "disruption blocked (%s): %s", reason, m.GetWhy())
			return
		}
		r.trace(s)
		rm := r.removal()
		rm.Reason, rm.Why = reason, m.GetWhy()
		if a := enumWord(m.GetAction().String(), "DISRUPTION_ACTION_"); a != "unspecified" {
			rm.Action = a
		}
		if m.GetSavingsUsdPerHour() != 0 {
			rm.SavingsPerHour = m.GetSavingsUsdPerHour()
		}
		rm.Replacements, rm.DecidedAt = m.GetReplacementNodeClaimNames(), ts(m.GetDecidedAt().AsTime())
		step := map[terminationv1.DisruptionDecisionKind]disruption.StepName{
			terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_DECIDED:     disruption.StepDecided,
			terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_TERMINATING: disruption.StepDeleted,
			terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_ABANDONED:   disruption.StepAbandoned,
		}[m.GetKind()]
		if m.GetKind() == terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_ABANDONED {
			rm.Outcome = "abandoned"
		}
		if step != "" && !hasStep(rm.Steps, step) {
			rm.Steps = append(rm.Steps, disruption.Step{Name: step, At: s.Time.UTC()})
		}
		r.event(s.Time, s.Msg.Subject, "disruption %s: %s, %s (saves $%.4f/h)", kind, reason, m.GetWhy(), m.GetSavingsUsdPerHour())
	case *terminationv1.TerminationIntent:
		if m.GetNodeClaimName() != claim && (r.Node == "" || m.GetNodeName() != r.Node) {
			return
		}
		r.trace(s)
		rm := r.removal()
		rm.Reason = enumWord(m.GetReason().String(), "TERMINATION_REASON_")
		if m.GetWhy() != "" {
			rm.Why = m.GetWhy()
		}
		if len(m.GetReplacementNodeClaimNames()) > 0 {
			rm.Replacements = m.GetReplacementNodeClaimNames()
		}
		rm.Requested, rm.InterruptionFrom = ts(m.GetRequestTime().AsTime()), m.GetInterruptionEventId()
		r.event(s.Time, s.Msg.Subject, "termination requested: %s%s", rm.Reason, suffix(": ", m.GetWhy()))
	case *terminationv1.TerminationResult:
		if m.GetNodeClaimName() != claim && (r.Node == "" || m.GetNodeName() != r.Node) {
			return
		}
		rm := r.removal()
		if rm.Reason == "" {
			rm.Reason = enumWord(m.GetReason().String(), "TERMINATION_REASON_")
		}
		rm.Outcome = enumWord(m.GetOutcome().String(), "TERMINATION_OUTCOME_")
		rm.PodsEvicted, rm.EvictionRetries, rm.Error = m.GetPodsEvicted(), m.GetEvictionRetries(), m.GetError()
		if m.GetDrainDuration() != nil {
			rm.Drain = m.GetDrainDuration().AsDuration().Round(time.Millisecond).String()
		}
		rm.Completed = ts(m.GetCompleteTime().AsTime())
		r.event(s.Time, s.Msg.Subject, "termination %s: %d pod(s) evicted%s", rm.Outcome, m.GetPodsEvicted(), suffix(", ", m.GetError()))
	}
}

func (r *NodeReport) removal() *Removal {
	if r.Removal == nil {
		r.Removal = &Removal{}
	}
	return r.Removal
}

// fromClaim fills what the NodeClaim object says: the lifecycle conditions, the pool, the
// instance, a disruption in progress.
func (r *NodeReport) fromClaim(c *karpv1.NodeClaim) {
	if r.NodePool == "" {
		r.NodePool = c.Labels[karpv1.NodePoolLabelKey]
	}
	if r.Batch == "" {
		r.Batch = c.Annotations["fleetwright.io/batch-id"]
	}
	if r.Created == nil {
		r.Created = ts(c.CreationTimestamp.Time)
	}
	for _, cond := range []struct {
		typ string
		at  **time.Time
	}{{karpv1.ConditionTypeLaunched, &r.Launched}, {karpv1.ConditionTypeRegistered, &r.Registered}, {karpv1.ConditionTypeInitialized, &r.Initialized}} {
		if c := c.Condition(cond.typ); c != nil && c.Status == "True" && *cond.at == nil {
			*cond.at = ts(c.LastTransitionTime.Time)
		}
	}
	if d, ok, _ := disruption.DecisionOf(c); ok {
		rm := r.removal()
		if rm.Reason == "" {
			rm.Reason, rm.Why, rm.Action = strings.ToLower(string(d.Reason)), d.Why, strings.ToLower(string(d.Action))
			rm.Replacements, rm.SavingsPerHour = d.Replacements, d.Savings
		}
		rm.Steps = d.Steps // the claim's record is the fuller one
		if rm.DecidedAt == nil && !d.DecidedAt.IsZero() {
			rm.DecidedAt = ts(d.DecidedAt)
		}
	}
	if d := c.Condition(karpv1.ConditionTypeDisruptionReason); d != nil && d.Status == "True" {
		rm := r.removal()
		if rm.Reason == "" {
			rm.Reason = strings.ToLower(d.Reason)
		}
		if rm.Why == "" {
			rm.Why = d.Message
		}
	}
	if c.DeletionTimestamp != nil {
		rm := r.removal()
		if rm.Reason == "" {
			rm.Reason = "deleted"
		}
		r.event(c.DeletionTimestamp.Time, "kubernetes", "nodeclaim %s deleting", c.Name)
	}
	if r.InstanceType == "" {
		r.InstanceType = c.Labels[corev1.LabelInstanceTypeStable]
		r.Zone = c.Labels[corev1.LabelTopologyZone]
		r.CapacityType = c.Labels[karpv1.CapacityTypeLabelKey]
	}
}

// fromNode fills the node's labels and the pods running on it.
func (r *NodeReport) fromNode(ctx context.Context, kube client.Client, name string) error {
	var n corev1.Node
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading node %s: %w", name, err)
	}
	if r.InstanceType == "" {
		r.InstanceType, r.Zone, r.CapacityType = n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelTopologyZone], n.Labels[karpv1.CapacityTypeLabelKey]
	}
	if r.NodePool == "" {
		r.NodePool = n.Labels[karpv1.NodePoolLabelKey]
	}
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", name)}); err != nil {
		return fmt.Errorf("listing pods on %s: %w", name, err)
	}
	for _, p := range pods.Items {
		r.RunningPods = append(r.RunningPods, p.Namespace+"/"+p.Name)
	}
	sort.Strings(r.RunningPods)
	return nil
}

// kubeEvents adds the Kubernetes events recorded on the NodeClaim and the Node (the scheduler's
// and terminator's words: DisruptionBlocked, Unconsolidatable, ...), and takes a block from them
// when the bus said none.
func (r *NodeReport) kubeEvents(ctx context.Context, kube client.Client) error {
	var items []corev1.Event
	for _, name := range []string{r.NodeClaim, r.Node} {
		if name == "" {
			continue
		}
		var evs corev1.EventList
		if err := kube.List(ctx, &evs, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.name", name)}); err != nil {
			return fmt.Errorf("listing events: %w", err)
		}
		items = append(items, evs.Items...)
	}
	var blocks []string
	seen := map[string]bool{}
	for _, e := range items {
		if seen[string(e.UID)] {
			continue
		}
		seen[string(e.UID)] = true
		o := e.InvolvedObject
		if !(o.Kind == "NodeClaim" && o.Name == r.NodeClaim) && !(o.Kind == "Node" && r.Node != "" && o.Name == r.Node) {
			continue
		}
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		r.event(at, "event/"+strings.ToLower(o.Kind), "%s: %s", e.Reason, e.Message)
		if e.Reason == "DisruptionBlocked" || e.Reason == "Unconsolidatable" {
			blocks = append(blocks, e.Message)
		}
	}
	if len(r.Blocked) == 0 {
		r.Blocked = blocks
	}
	return nil
}

// price finds what the chosen offering costs in the intent's list, and says why it was chosen.
func (r *NodeReport) price() {
	if r.considered == nil || r.InstanceType == "" {
		return
	}
	for i, it := range r.considered.GetInstanceTypes() {
		if it.GetName() != r.InstanceType {
			continue
		}
		for _, o := range it.GetOfferings() {
			if o.GetZone() == r.Zone && capacityType(o.GetCapacityType()) == r.CapacityType {
				r.PriceUSDPerHour = o.GetPriceUsdPerHour()
			}
		}
		switch {
		case i == 0:
			r.Chosen = fmt.Sprintf("the cheapest of the %d instance types that fit the pods", len(r.considered.GetInstanceTypes()))
		case len(r.Unavailable) > 0:
			r.Chosen = fmt.Sprintf("number %d by price of %d: the cheaper offerings were out of capacity (%s)", i+1,
				len(r.considered.GetInstanceTypes()), strings.Join(r.Unavailable, "; "))
		default:
			r.Chosen = fmt.Sprintf("number %d by price of %d, picked by EC2 Fleet's allocation strategy among the allowed offerings", i+1,
				len(r.considered.GetInstanceTypes()))
		}
	}
}

func capacityType(c commonv1.CapacityType) string {
	switch c {
	case commonv1.CapacityType_CAPACITY_TYPE_SPOT:
		return "spot"
	case commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND:
		return "on-demand"
	}
	return ""
}

// enumWord turns FOO_BAR_REASON_EMPTY into "empty".
func enumWord(s, prefix string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, prefix)), "_", " ")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func suffix(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

func printNodeReport(w io.Writer, r *NodeReport) {
	state := "gone from the cluster"
	if r.InCluster {
		state = "in the cluster"
	}
	fmt.Fprintf(w, "Node:          %s\n", or(r.Node, "(none registered)"))
	fmt.Fprintf(w, "NodeClaim:     %s (%s)\n", or(r.NodeClaim, "?"), state)
	fmt.Fprintf(w, "NodePool:      %s\n", or(r.NodePool, "?"))
	if r.InstanceType != "" {
		fmt.Fprintf(w, "Instance:      %s %s in %s%s\n", r.CapacityType, r.InstanceType, r.Zone, suffix(", ", r.InstanceID))
	}
	if r.PriceUSDPerHour > 0 {
		fmt.Fprintf(w, "Price:         $%.4f/h\n", r.PriceUSDPerHour)
	}
	if len(r.Pods) > 0 {
		fmt.Fprintf(w, "Launched for:  %d pod(s): %s\n", len(r.Pods), strings.Join(r.Pods, ", "))
	}
	if r.Batch != "" {
		fmt.Fprintf(w, "Batch:         %s\n", r.Batch)
	}
	if len(r.RunningPods) > 0 {
		fmt.Fprintf(w, "Running now:   %s\n", strings.Join(r.RunningPods, ", "))
	}
	if len(r.Considered) > 0 {
		fmt.Fprintf(w, "Considered:    %d instance type(s), cheapest first:\n", len(r.Considered))
		for i, c := range r.Considered {
			if i == 8 {
				fmt.Fprintf(w, "               ... and %d more\n", len(r.Considered)-i)
				break
			}
			mark := " "
			if c.Name == r.InstanceType {
				mark = "*"
			}
			fmt.Fprintf(w, "             %s %-16s $%.4f/h (%s)\n", mark, c.Name, c.PriceUSDPerHour, c.Offering)
		}
	}
	if r.Chosen != "" {
		fmt.Fprintf(w, "Why this one:  %s\n", r.Chosen)
	}
	for _, l := range []struct {
		name string
		at   *time.Time
	}{{"Created", r.Created}, {"Launched", r.Launched}, {"Registered", r.Registered}, {"Initialized", r.Initialized}} {
		if l.at != nil {
			fmt.Fprintf(w, "%-14s %s\n", l.name+":", l.at.Format(time.RFC3339))
		}
	}
	if rm := r.Removal; rm != nil {
		fmt.Fprintf(w, "Removal:       %s%s\n", or(rm.Reason, "?"), suffix(": ", rm.Why))
		if rm.Action != "" {
			fmt.Fprintf(w, "  decision:    %s%s\n", rm.Action, suffix(", replacements ", strings.Join(rm.Replacements, ", ")))
		}
		if rm.SavingsPerHour != 0 {
			fmt.Fprintf(w, "  saves:       $%.4f/h\n", rm.SavingsPerHour)
		}
		for i, st := range rm.Steps {
			label := ""
			if i == 0 {
				label = "steps:"
			}
			fmt.Fprintf(w, "  %-12s %s  %s%s\n", label, st.At.Format(time.RFC3339), st.Name, suffix(": ", st.Detail))
		}
		if rm.Outcome != "" {
			fmt.Fprintf(w, "  outcome:     %s, %d pod(s) evicted (%d retries)%s%s\n", rm.Outcome, rm.PodsEvicted, rm.EvictionRetries,
				suffix(", drained in ", rm.Drain), suffix(", error: ", rm.Error))
		}
	}
	if len(r.Blocked) > 0 {
		fmt.Fprintf(w, "Not disrupted because:\n")
		for _, b := range r.Blocked {
			fmt.Fprintf(w, "  - %s\n", b)
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

func or(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

func hasStep(steps []disruption.Step, name disruption.StepName) bool {
	for _, s := range steps {
		if s.Name == name {
			return true
		}
	}
	return false
}
