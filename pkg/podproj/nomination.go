package podproj

import (
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// A nomination is the scheduler's promise of room on a NodeClaim to a pending pod. It is a hint
// with an end: kube-scheduler does not read it, and may fill the claim's node with other pods.
// The one rule for when a nomination holds, used by pod-watcher (whether to offer the pod), by
// the scheduler (whether the pod needs capacity, and whose room it takes) and by the terminator
// (whether a node is awaited):
//
//	no nomination, or the claim is gone or being deleted     → not nominated (a claim not seen
//	                                                           yet is given Grace from the
//	                                                           nomination to show up)
//	the scheduler recorded that the node cannot honour it    → ended (PodNomination.Ended: its
//	                                                           bound pods leave no room, or
//	                                                           kube-scheduler refused the pod
//	                                                           there once it took pods)
//	claim in flight (its node not ready yet)                 → live, until Limit after nomination
//	claim's node ready, pod still pending                    → live for Grace after
//	                                                           max(nominated at, node ready at),
//	                                                           then expired: offer the pod again
//
// While live, the pod is not offered again and its requests count against the claim's room,
// so a later batch is not planned onto room promised to it.
//
// Nominations are recorded on the NodeClaim, not on the pods: one annotation per pod,
// NominationKeyPrefix + the pod's UID, holding PodNomination as JSON. A claim is created with
// the nominations of the pods it is planned for, so planning N pods onto K new claims costs K
// writes, not K+N; pods placed on an existing claim cost one merge patch per claim. The record
// survives a scheduler restart (it is in the API), and a merge patch of one key never disturbs
// another's, so nominating and ending need no read-modify-write.

// NominationKeyPrefix starts the annotation key of each pod nominated to a NodeClaim; the rest of
// the key is the pod's UID.
const NominationKeyPrefix = "nominated.fleetwright.io/"

// PodNomination is one pod's nomination to a NodeClaim as the claim records it.
type PodNomination struct {
	Claim string `json:"-"` // the NodeClaim that holds the record
	UID   string `json:"-"` // the pod's UID (the key's suffix)
	// Pod is namespace/name.
	Pod string    `json:"pod"`
	At  time.Time `json:"at"`
	// Ended, when set, says why the scheduler ended the nomination before its time (the claim's
	// node has no room left for the pod, or kube-scheduler could not place it there).
	Ended string `json:"ended,omitempty"`
}

// Supersedes reports whether n counts over cur, another record of the same pod's nomination (on
// another claim): the later one does, and of two at the same second (a pod ended on one claim
// and nominated to another within it) the one not ended.
func (n PodNomination) Supersedes(cur PodNomination) bool {
	if !n.At.Equal(cur.At) {
		return n.At.After(cur.At)
	}
	return n.Ended == "" && cur.Ended != ""
}

// NominationKey is the annotation key of a pod's nomination.
func NominationKey(uid string) string { return NominationKeyPrefix + uid }

// Value is the annotation value recording the nomination.
func (n PodNomination) Value() string {
	b, _ := json.Marshal(n) // strings and a time: cannot fail
	return string(b)
}

// NominatedUIDs returns the UIDs of the pods a NodeClaim's annotations nominate.
func NominatedUIDs(annotations map[string]string) []string {
	var out []string
	for k := range annotations {
		if uid, ok := strings.CutPrefix(k, NominationKeyPrefix); ok && uid != "" {
			out = append(out, uid)
		}
	}
	return out
}

// NominationOn reads the nomination of the pod with this UID recorded on the claim.
func NominationOn(nc *karpv1.NodeClaim, uid string) (PodNomination, bool) {
	v, ok := nc.Annotations[NominationKey(uid)]
	if !ok {
		return PodNomination{}, false
	}
	n := PodNomination{}
	if err := json.Unmarshal([]byte(v), &n); err != nil {
		// Not written by a scheduler: taken as a nomination of unknown time, which the rule
		// bounds by the claim's fate.
		n = PodNomination{}
	}
	n.Claim, n.UID = nc.Name, uid
	return n, true
}

// NominationsOn reads every nomination recorded on the claim, oldest first (then by pod).
func NominationsOn(nc *karpv1.NodeClaim) []PodNomination {
	var out []PodNomination
	for _, uid := range NominatedUIDs(nc.Annotations) {
		if n, ok := NominationOn(nc, uid); ok {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].Pod < out[j].Pod
	})
	return out
}

// NominationPatch is the merge patch recording the nominations on their claim (all of one
// claim): it sets each pod's key and leaves every other annotation alone.
func NominationPatch(noms []PodNomination) []byte {
	annotations := make(map[string]string, len(noms))
	for _, n := range noms {
		annotations[NominationKey(n.UID)] = n.Value()
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	return b
}

// NominationBudget bounds the bytes (keys and values) of the nomination records one NodeClaim
// holds: a quarter of the 256 KiB Kubernetes allows all of an object's annotations, leaving room
// for the others and for the reasons a nomination check writes into records it ends. A record
// takes about 130 bytes, so a claim records the nominations of about 500 pods; the scheduler
// records no more (WithinBudget), and plans no further pod onto a claim whose budget is spent
// (NominationsFull): such a pod waits for a later batch and a claim with room, so a node with
// thousands of tiny pods never makes a NodeClaim write fail.
const NominationBudget = 64 << 10

// RecordSize is the bytes the nomination's record takes on its claim.
func (n PodNomination) RecordSize() int { return len(NominationKey(n.UID)) + len(n.Value()) }

// RecordsSize is the bytes the nomination records among the annotations take.
func RecordsSize(annotations map[string]string) int {
	size := 0
	for k, v := range annotations {
		if strings.HasPrefix(k, NominationKeyPrefix) {
			size += len(k) + len(v)
		}
	}
	return size
}

// maxRecordSize is the largest record a pod's nomination can take: a UID, the longest namespace
// and name, a time.
var maxRecordSize = PodNomination{UID: strings.Repeat("u", 36), Pod: strings.Repeat("n", 63) + "/" + strings.Repeat("p", 253),
	At: time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC)}.RecordSize()

// NominationsFull reports whether a claim whose nomination records take size bytes has no room
// left in its budget for the record of any pod.
func NominationsFull(size int) bool { return size+maxRecordSize > NominationBudget }

// WithinBudget splits nominations to one claim, whose records take used bytes already, into
// those whose records fit its budget, in the order given, and those left over.
func WithinBudget(used int, noms []PodNomination) (kept, over []PodNomination) {
	for i, n := range noms {
		if used += n.RecordSize(); used > NominationBudget {
			return noms[:i:i], noms[i:]
		}
	}
	return noms, nil
}

// Default bounds of a nomination (see NominationRule).
const (
	DefaultNominationGrace = 20 * time.Second
	DefaultNominationLimit = 15 * time.Minute
)

// Claim is what the nomination rule needs to know of a NodeClaim.
type Claim struct {
	Name     string
	Deleting bool
	NodeName string
	// ReadyAt is when the claim's node could first take pods (its Initialized condition); zero
	// while the claim is in flight.
	ReadyAt time.Time
}

// ClaimOf reads a NodeClaim for the nomination rule.
func ClaimOf(nc *karpv1.NodeClaim) Claim {
	c := Claim{Name: nc.Name, Deleting: nc.DeletionTimestamp != nil, NodeName: nc.Status.NodeName}
	if cond := nc.Condition(karpv1.ConditionTypeInitialized); cond != nil && cond.Status == "True" {
		c.ReadyAt = cond.LastTransitionTime.Time
	}
	return c
}

// NominationRule bounds nominations. Grace is how long a pod may stay pending once its claim's
// node is ready (kube-scheduler needs a moment to bind a batch); Limit is the longest a
// nomination to a claim still in flight holds.
type NominationRule struct {
	Grace, Limit time.Duration
}

// RegisterFlags adds the rule's bounds as flags with environment fallbacks (env reads one, as
// service.EnvDuration does). pod-watcher, the scheduler and the terminator take them and must
// agree: deploy/ sets them once, in the fleetwright-settings ConfigMap.
func (r *NominationRule) RegisterFlags(fs *flag.FlagSet, env func(key string, def time.Duration) time.Duration) {
	fs.DurationVar(&r.Grace, "nomination-grace", env("NOMINATION_GRACE", DefaultNominationGrace),
		"offer a pod again once it is still pending this long after the node of the NodeClaim it was nominated to is ready (env NOMINATION_GRACE)")
	fs.DurationVar(&r.Limit, "nomination-limit", env("NOMINATION_LIMIT", DefaultNominationLimit),
		"end a nomination to a NodeClaim whose node is not ready after this long (env NOMINATION_LIMIT)")
}

// Validate checks the bounds.
func (r NominationRule) Validate() error {
	if r.Grace <= 0 || r.Limit <= 0 {
		return fmt.Errorf("--nomination-grace and --nomination-limit must be positive")
	}
	return nil
}

// Nomination is a pod's nomination as the rule judges it at one instant.
type Nomination struct {
	Claim string    // the NodeClaim named on the pod; empty when it names none
	At    time.Time // when the pod was nominated; zero if unknown
	Live  bool
	// Expires is when a live nomination ends if the pod is still pending; zero when only the
	// claim's fate can end it.
	Expires time.Time
	// Expired says, for a nomination that ended, why: the text of the event the pod gets when it
	// is offered again.
	Expired string
}

// Judge applies the rule to a nomination of a pod to claim at the given time; lookup finds a
// NodeClaim by name.
func (r NominationRule) Judge(claim string, at time.Time, lookup func(name string) (Claim, bool), now time.Time) Nomination {
	n := Nomination{Claim: claim, At: at}
	if claim == "" {
		return n
	}
	c, ok := lookup(claim)
	switch {
	case !ok && !at.IsZero() && now.Before(at.Add(r.Grace)):
		// Nominated moments ago to a claim this cache has not seen yet (the pod's update can
		// arrive before the claim's): give the claim's watch the grace to catch up.
		n.Live, n.Expires = true, at.Add(r.Grace)
		return n
	case !ok:
		n.Expired = fmt.Sprintf("nodeclaim/%s it was nominated to no longer exists", claim)
		return n
	case c.Deleting:
		n.Expired = fmt.Sprintf("nodeclaim/%s it was nominated to is being deleted", claim)
		return n
	}
	if c.ReadyAt.IsZero() {
		if at.IsZero() || r.Limit <= 0 {
			n.Live = true
			return n
		}
		n.Expires = at.Add(r.Limit)
		n.Live = now.Before(n.Expires)
		if !n.Live {
			n.Expired = fmt.Sprintf("nodeclaim/%s it was nominated to %s ago has no ready node yet", claim, roundSeconds(now.Sub(at)))
		}
		return n
	}
	from := c.ReadyAt
	if at.After(from) {
		from = at
	}
	n.Expires = from.Add(r.Grace)
	n.Live = now.Before(n.Expires)
	if !n.Live {
		n.Expired = fmt.Sprintf("nominated to nodeclaim/%s %s ago, but its node %s has been ready for %s without room for the pod (kube-scheduler placed other pods there)",
			claim, roundSeconds(now.Sub(orNow(at, c.ReadyAt))), c.NodeName, roundSeconds(now.Sub(c.ReadyAt)))
	}
	return n
}

// JudgeNomination applies the rule to a recorded nomination (the zero PodNomination: none): one
// the scheduler ended is over, whatever the clock says.
func (r NominationRule) JudgeNomination(n PodNomination, lookup func(name string) (Claim, bool), now time.Time) Nomination {
	if n.Ended != "" {
		return Nomination{Claim: n.Claim, At: n.At, Expired: n.Ended}
	}
	return r.Judge(n.Claim, n.At, lookup, now)
}

func orNow(at, fallback time.Time) time.Time {
	if at.IsZero() {
		return fallback
	}
	return at
}

func roundSeconds(d time.Duration) time.Duration { return d.Round(time.Second) }
