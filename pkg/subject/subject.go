// Package subject names every NATS subject, JetStream stream and key-value
// bucket Fleetwright uses, so that no service spells one by hand.
//
// All subjects live under one prefix (default "fleetwright"):
//
//	<prefix>.pods.pending               pod-watcher -> scheduler (PendingPodBatch)
//	<prefix>.launch.intents             scheduler   -> launcher  (LaunchIntent)
//	<prefix>.launch.results             launcher    -> anyone    (LaunchResult)
//	<prefix>.offerings.unavailable      launcher    -> scheduler (ICE offerings)
//	<prefix>.nodes.events               launcher    -> anyone    (node registered, ...)
//	<prefix>.interruptions.<kind>       terminator (SQS bridge)  -> terminator
//	<prefix>.terminations.intents       terminator -> terminator workers (deleted NodeClaims, slow work)
//	<prefix>.terminations.urgent        terminator  -> terminator urgent workers (interruptions)
//	<prefix>.terminations.results       terminator workers -> anyone
//	<prefix>.terminations.decisions     scheduler   -> audit     (DisruptionDecision: why a node goes, or why not)
//	<prefix>.deadletter.<original rest> messages that could not be decoded or kept failing
//	<prefix>.scheduler.simulate         CLI -> scheduler (request/reply, no stream: SimulateRequest)
//	<prefix>.deadletter.sqs.interruptions interruption-queue (SQS) messages that could not be read
//
// A Prefix is a validated NATS token chain; its methods build full subjects,
// stream names and the catalog bucket name.
package subject

import (
	"fmt"
	"strings"
)

// DefaultPrefix is the subject prefix used when none is configured.
const DefaultPrefix Prefix = "fleetwright"

// Leaf names, relative to the prefix. Use Prefix.Of to make a full subject.
const (
	PodsPending          = "pods.pending"
	LaunchIntents        = "launch.intents"
	LaunchResults        = "launch.results"
	OfferingsUnavailable = "offerings.unavailable"
	NodesEvents          = "nodes.events"
	TerminationsIntents  = "terminations.intents"
	// TerminationsUrgent carries the TerminationIntents of interruptions: a spot instance is
	// reclaimed two minutes after its warning, whatever else is draining. It has a durable
	// consumer ("terminator-urgent") and workers of its own, so no drain a PodDisruptionBudget
	// holds on TerminationsIntents can hold an interruption back.
	TerminationsUrgent  = "terminations.urgent"
	TerminationsResults = "terminations.results"
	// TerminationsDecisions tells each step of the scheduler's disruption decisions, for the
	// audit stream only: no service consumes it (the terminator's workers follow
	// TerminationsIntents alone).
	TerminationsDecisions = "terminations.decisions"
	// SchedulerSimulate is request/reply, outside every stream: any scheduler replica (queue
	// group SimulateQueue) answers a SimulateRequest with the plan it would make now.
	SchedulerSimulate = "scheduler.simulate"
	// SimulateQueue is the scheduler replicas' queue group on SchedulerSimulate.
	SimulateQueue = "scheduler"
	// SQSInterruptions names the interruption queue (SQS) where a subject is wanted: a queue
	// message the terminator cannot read is dead-lettered on
	// <prefix>.deadletter.sqs.interruptions. Nothing is published on the subject itself.
	SQSInterruptions = "sqs.interruptions"

	// interruptions and deadletter are the roots of subject families built by
	// Prefix.Interruptions and Prefix.DeadLetter.
	interruptions = "interruptions"
	deadletter    = "deadletter"
)

// Interruption kinds, the last token of <prefix>.interruptions.<kind>.
const (
	InterruptionSpot        = "spot"
	InterruptionScheduled   = "scheduled"
	InterruptionStateChange = "statechange"
	InterruptionRebalance   = "rebalance"
)

// Stream keys. Prefix.Stream turns one into the stream's full name.
const (
	StreamPods          = "PODS"
	StreamLaunch        = "LAUNCH"
	StreamOfferings     = "OFFERINGS"
	StreamNodes         = "NODES"
	StreamInterruptions = "INTERRUPTIONS"
	StreamTerminations  = "TERMINATIONS"
	StreamDeadLetter    = "DEADLETTER"
)

// streamRoots maps each stream key to the first subject token it captures
// (the stream holds "<prefix>.<root>.>").
var streamRoots = map[string]string{
	StreamPods:          "pods",
	StreamLaunch:        "launch",
	StreamOfferings:     "offerings",
	StreamNodes:         "nodes",
	StreamInterruptions: interruptions,
	StreamTerminations:  "terminations",
	StreamDeadLetter:    deadletter,
}

// Streams lists every stream key in a stable order.
func Streams() []string {
	return []string{
		StreamPods, StreamLaunch, StreamOfferings, StreamNodes,
		StreamInterruptions, StreamTerminations, StreamDeadLetter,
	}
}

// Service names, as each service names itself (service.Options.Name) and logs in to NATS.
const (
	PodWatcher = "pod-watcher"
	Scheduler  = "scheduler"
	Launcher   = "launcher"
	Terminator = "terminator"
)

// Inbox is the inbox prefix of a service's NATS connection: JetStream API replies and acks,
// pull-consumer deliveries, key-value watches and request replies arrive on <Inbox>.<id>. Each
// service's NATS user may subscribe only below its own (deploy/base/nats/auth.conf), so no
// service's credentials read another's replies, as one shared _INBOX.> would let them.
func Inbox(service string) string { return "_INBOX_" + service }

// streamOwners names the one service that creates and updates each stream: a service that
// publishes to it. Every other service only looks the stream up (its NATS user may not update
// it), so no service's start can change the config another's stream was given. The owners
// form no cycle: the pod-watcher and the launcher need no stream of another, the terminator
// needs the launcher's, the scheduler everyone's; so services started one after another in
// that order each become ready before the next starts.
var streamOwners = map[string]string{
	StreamPods:          PodWatcher, // pending-pod batches
	StreamLaunch:        Launcher,   // launch results (the scheduler publishes intents to it)
	StreamOfferings:     Launcher,   // unavailable offerings (the scheduler adds interrupted spot ones)
	StreamNodes:         Launcher,   // node events (the terminator adds its own)
	StreamInterruptions: Terminator, // the SQS bridge's interruption events
	StreamTerminations:  Terminator, // termination intents and results (the scheduler adds its intents and decisions)
	StreamDeadLetter:    Launcher,   // everyone's dead letters; the launcher needs no one else's stream, so it is there first
}

// CatalogOwner is the service that creates and updates the catalog bucket (it writes the
// catalog); the scheduler only reads it.
const CatalogOwner = Launcher

// streamsUsed are the streams of others each service publishes to or reads, which it waits for
// at start; see StreamsUsed.
var streamsUsed = map[string][]string{
	Scheduler:  {StreamPods, StreamLaunch, StreamOfferings, StreamInterruptions, StreamTerminations, StreamDeadLetter},
	Terminator: {StreamLaunch, StreamNodes, StreamDeadLetter},
}

// StreamOwner returns the service that creates and updates the stream key, or "" for an
// unknown key.
func StreamOwner(key string) string { return streamOwners[key] }

// OwnedStreams lists, in Streams order, the stream keys service creates and updates.
func OwnedStreams(service string) []string {
	var out []string
	for _, key := range Streams() {
		if streamOwners[key] == service {
			out = append(out, key)
		}
	}
	return out
}

// StreamsUsed lists the stream keys service publishes to or reads but does not own: it only
// looks them up, and waits at start until their owners have created them.
func StreamsUsed(service string) []string { return append([]string(nil), streamsUsed[service]...) }

// ReadsCatalog reports whether service reads the catalog bucket without owning it.
func ReadsCatalog(service string) bool { return service == Scheduler }

// Prefix is the first token(s) of every Fleetwright subject, e.g.
// "fleetwright" or "staging.fleetwright".
type Prefix string

// ParsePrefix validates s as a prefix: one or more dot-separated tokens of
// letters, digits, '-' and '_'; no wildcards, spaces or empty tokens. An empty
// s gives DefaultPrefix.
func ParsePrefix(s string) (Prefix, error) {
	if s == "" {
		return DefaultPrefix, nil
	}
	if err := validateTokens(s); err != nil {
		return "", fmt.Errorf("invalid subject prefix %q: %w", s, err)
	}
	return Prefix(s), nil
}

// Validate reports whether p is a valid prefix (see ParsePrefix).
func (p Prefix) Validate() error {
	if p == "" {
		return fmt.Errorf("invalid subject prefix: empty")
	}
	_, err := ParsePrefix(string(p))
	return err
}

// String returns the prefix itself.
func (p Prefix) String() string { return string(p) }

// Of joins the prefix and a leaf name: Of(PodsPending) = "<prefix>.pods.pending".
func (p Prefix) Of(leaf string) string { return string(p) + "." + leaf }

// Interruptions is the subject for one kind of interruption event.
func (p Prefix) Interruptions(kind string) string {
	return p.Of(interruptions + "." + kind)
}

// AllInterruptions matches every interruption kind.
func (p Prefix) AllInterruptions() string { return p.Of(interruptions + ".*") }

// DeadLetter is where a message that arrived on original is parked:
// "<prefix>.deadletter.<original without prefix>". A subject outside the
// prefix keeps all its tokens.
func (p Prefix) DeadLetter(original string) string {
	rest := strings.TrimPrefix(original, string(p)+".")
	return p.Of(deadletter + "." + rest)
}

// AllDeadLetters matches every dead-letter subject.
func (p Prefix) AllDeadLetters() string { return p.Of(deadletter + ".>") }

// All matches every subject under the prefix ("<prefix>.>").
func (p Prefix) All() string { return p.Of(">") }

// Stream returns the full stream name for a stream key, e.g.
// Stream(StreamLaunch) = "FLEETWRIGHT_LAUNCH". Stream names may not contain
// dots, so dots in the prefix become underscores.
func (p Prefix) Stream(key string) string {
	return strings.ToUpper(strings.ReplaceAll(string(p), ".", "_")) + "_" + key
}

// StreamSubjects returns the subject filter a stream captures, e.g.
// StreamSubjects(StreamLaunch) = "<prefix>.launch.>". It returns "" for an
// unknown key.
func (p Prefix) StreamSubjects(key string) string {
	root, ok := streamRoots[key]
	if !ok {
		return ""
	}
	return p.Of(root + ".>")
}

// CatalogBucket is the JetStream key-value bucket holding the instance
// catalog, e.g. "fleetwright-catalog".
func (p Prefix) CatalogBucket() string {
	return strings.ReplaceAll(string(p), ".", "_") + "-catalog"
}

// ValidateSubject checks that s is a concrete subject one can publish to:
// dot-separated non-empty tokens, no wildcards and no whitespace.
func ValidateSubject(s string) error {
	if s == "" {
		return fmt.Errorf("invalid subject: empty")
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" {
			return fmt.Errorf("invalid subject %q: empty token", s)
		}
		if tok == "*" || tok == ">" {
			return fmt.Errorf("invalid subject %q: wildcard %q", s, tok)
		}
		if strings.ContainsAny(tok, " \t\r\n") {
			return fmt.Errorf("invalid subject %q: whitespace", s)
		}
	}
	return nil
}

// validateTokens checks a dot-separated chain of tokens made of
// [A-Za-z0-9_-].
func validateTokens(s string) error {
	for i, tok := range strings.Split(s, ".") {
		if tok == "" {
			return fmt.Errorf("token %d is empty", i+1)
		}
		for _, r := range tok {
			if !isTokenRune(r) {
				return fmt.Errorf("token %q has character %q (allowed: letters, digits, '-', '_')", tok, r)
			}
		}
	}
	return nil
}

func isTokenRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}
