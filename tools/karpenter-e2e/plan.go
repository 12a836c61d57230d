package main

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// suite is one of Karpenter's ginkgo test packages, built into its own test binary.
type suite struct {
	name   string // the summary line it counts in: "regression" or "scheduling"
	pkg    string // the package `go test -c` builds
	policy string // the MIN_VALUES_POLICY the settings shim carries while it runs
	prefix string // before each spec's text in the table
	// nodeFlags: the suite takes the node class and pool as --default-nodeclass/--default-nodepool
	// (the core suite); the provider's suites make their own.
	nodeFlags bool
}

func (s suite) binary() string { return s.pkg[strings.LastIndex(s.pkg, "/")+1:] + ".test" }

// The provider's scheduling suite is one set of specs registered twice, once per minValues
// policy (scheduling-strict, scheduling-besteffort): both count in "scheduling".
var suites = []suite{
	{name: "regression", pkg: coreModule + "/test/suites/regression", policy: "Strict", nodeFlags: true},
	{name: "scheduling", pkg: awsModule + "/test/suites/scheduling-strict", policy: "Strict", prefix: "[Strict] "},
	{name: "scheduling", pkg: awsModule + "/test/suites/scheduling-besteffort", policy: "BestEffort", prefix: "[BestEffort] "},
}

// batch is a group of specs run by one test binary, in as few processes as it takes: a spec
// that runs past specTimeout is interrupted (failed, "timed out"), and the batch goes on with
// the specs after it in a new process, after the cluster is cleaned.
type batch struct {
	name        string
	suite       string // a suite's binary, e.g. "regression.test"
	focus       *regexp.Regexp
	specTimeout time.Duration
}

// defaultSpecTimeout bounds one spec: Karpenter's environment waits 15 minutes in every
// Eventually, so a spec that fails would otherwise take that long, each.
const defaultSpecTimeout = 6 * time.Minute

// batches, in the order they run; a spec runs in the first batch whose focus matches its text.
var batches = []batch{
	{name: "validation", suite: "regression.test", focus: regexp.MustCompile(`^Integration Validation `)},
	{name: "integration", suite: "regression.test", focus: regexp.MustCompile(`^Integration `)},
	// A claim whose node never registers is deleted after the registration TTL, 15 minutes.
	{name: "nodeclaim", suite: "regression.test", focus: regexp.MustCompile(`^NodeClaim `), specTimeout: 18 * time.Minute},
	{name: "termination", suite: "regression.test", focus: regexp.MustCompile(`^Termination `), specTimeout: 10 * time.Minute},
	{name: "expiration", suite: "regression.test", focus: regexp.MustCompile(`^Expiration `), specTimeout: 10 * time.Minute},
	// A drift whose replacement never registers or initializes is given up after ~10 minutes,
	// and the Failure specs then watch for 2 more.
	{name: "drift", suite: "regression.test", focus: regexp.MustCompile(`^Drift `), specTimeout: 16 * time.Minute},
	{name: "chaos", suite: "regression.test", focus: regexp.MustCompile(`^Chaos `)},
	{name: "performance", suite: "regression.test", focus: regexp.MustCompile(`^Performance `), specTimeout: 15 * time.Minute},
	{name: "capacitybuffer", suite: "regression.test", focus: regexp.MustCompile(`^CapacityBuffer `)},
	{name: "staticcapacity", suite: "regression.test", focus: regexp.MustCompile(`^StaticCapacity `)},
	{name: "strict", suite: "scheduling-strict.test", focus: regexp.MustCompile(`^Scheduling `)},
	{name: "besteffort", suite: "scheduling-besteffort.test", focus: regexp.MustCompile(`^Scheduling `)},
	{name: "nodeoverlay", suite: "scheduling-besteffort.test", focus: regexp.MustCompile(`^Node Overlay `)},
}

// skipKind says why a spec is not run: Fleetwright lacks the feature, or the local stack
// cannot play the part (kwok is not a kubelet, the emulator is not all of AWS).
type skipKind string

const (
	missingFeature skipKind = "feature"
	localLimit     skipKind = "local stack"
)

// skip is a spec (or specs) not run, and why. Nothing is skipped without a reason in words.
type skip struct {
	suite   string // a suite's binary; "" for every suite
	pattern *regexp.Regexp
	kind    skipKind
	reason  string
}

func (s skip) text() string { return fmt.Sprintf("%s: %s", s.kind, s.reason) }

var skips = []skip{
	// The core suite.
	{pattern: regexp.MustCompile(`^CapacityBuffer `), kind: missingFeature,
		reason: "CapacityBuffer (autoscaling.x-k8s.io/v1beta1): capacity kept for virtual pods; Fleetwright serves the CRD only, for the suite's clean-up"},
	{pattern: regexp.MustCompile(`^StaticCapacity `), kind: missingFeature,
		reason: "static capacity (NodePool spec.replicas); the field is refused at admission"},
	{pattern: regexp.MustCompile(`^Integration Validation Repair Policy `), kind: missingFeature,
		reason: "node repair (Karpenter's NodeRepair: replacing nodes whose conditions stay unhealthy)"},
	{pattern: regexp.MustCompile(`^NodeClaim StandaloneNodeClaim should succeed to garbage collect an Instance that was launched by a NodeClaim but has no Instance mapping$`), kind: missingFeature,
		reason: "garbage collection of a NodeClaim whose instance EC2 does not know (Karpenter's nodeclaim garbage collection): the terminator collects instances no NodeClaim owns, not the reverse; a claim whose providerID names no instance stays"},
	{pattern: regexp.MustCompile(`^Drift should update the nodepool-hash annotation on the nodepool and nodeclaim when the nodepool's nodepool-hash-version annotation does not match the controller hash version$`), kind: missingFeature,
		reason: "Karpenter's own karpenter.sh/nodepool-hash values (hashstructure over Karpenter's Go types, version v3): Fleetwright's hash is its own (version fw1); a claim stamped with another version is re-stamped, not drifted, as this spec checks, but the spec compares the value with Karpenter's"},
	// The provider's scheduling suite.
	{pattern: regexp.MustCompile(`^Scheduling (Interruptible )?Capacity Res`), kind: missingFeature,
		reason: "capacity reservations (EC2NodeClass capacityReservationSelectorTerms, capacity type reserved); the emulator has no reservations either"},
	{pattern: regexp.MustCompile(`^Scheduling should provision EFAs `), kind: missingFeature,
		reason: "EFA network interfaces (EC2NodeClass networkInterfaces, refused at admission)"},
	{pattern: regexp.MustCompile(`^Scheduling should (launch an instance into|spread pods across partitions)`), kind: missingFeature,
		reason: "placement groups (EC2NodeClass placementGroupSelector, refused at admission)"},
	{pattern: regexp.MustCompile(`^Scheduling should launch an instance with nested virtualization`), kind: missingFeature,
		reason: "nested virtualization (EC2NodeClass cpuOptions, refused at admission)"},
	{pattern: regexp.MustCompile(`^Scheduling Labels should support well-known labels for windows-build version$`), kind: missingFeature,
		reason: "Windows nodes (the windows2022 alias and the Windows families are refused at admission)"},
	{pattern: regexp.MustCompile(`^Scheduling Labels should support well-known labels for capacity tenancy$`), kind: missingFeature,
		reason: "dedicated tenancy (karpenter.k8s.aws/instance-tenancy=dedicated offerings)"},
	{suite: "scheduling-besteffort.test", pattern: regexp.MustCompile(`^Scheduling Provisioning should honor minValuesPolicy when provisioning a node$`), kind: missingFeature,
		reason: "MIN_VALUES_POLICY=BestEffort (relaxing a pool's minValues to what the types allow); Fleetwright's minValues are Strict"},
	{pattern: regexp.MustCompile(`^Node Overlay `), kind: missingFeature,
		reason: "NodeOverlay (karpenter.sh/v1alpha1): price and capacity overrides; Fleetwright serves the CRD only, for the suite's clean-up"},
}

// spec is one spec of a suite, by its full text (its containers' texts and its own, joined
// with spaces, as ginkgo's focus matches it).
type spec struct {
	suite suite
	text  string
	// suiteText is the suite's description (RunSpecs'), which ginkgo's focus matches before the
	// spec's text.
	suiteText string
}

func (s spec) name() string { return s.suite.prefix + s.text }

// plan assigns each spec its skip or its batch; a spec that has neither is an error, so a new
// release's specs cannot go unrun unnoticed.
type plan struct {
	skipped map[spec]skip
	batches []plannedBatch
}

type plannedBatch struct {
	batch
	suite suite
	specs []spec
}

// makePlan plans the specs the suites list; keep (when not nil) selects the specs to plan at
// all (a subset: the others are neither run nor reported).
func makePlan(specs []spec, keep func(spec) bool) (plan, error) {
	p := plan{skipped: map[spec]skip{}}
	byBatch := map[string][]spec{}
	var lost []string
	for _, sp := range specs {
		if keep != nil && !keep(sp) {
			continue
		}
		if sk, ok := skipOf(sp); ok {
			p.skipped[sp] = sk
			continue
		}
		b, ok := batchOf(sp)
		if !ok {
			lost = append(lost, sp.name())
			continue
		}
		byBatch[b.name] = append(byBatch[b.name], sp)
	}
	if len(lost) > 0 {
		return plan{}, fmt.Errorf("specs in no batch and not skipped (add them to a batch, or to the skip list with a reason):\n  %s", strings.Join(lost, "\n  "))
	}
	for _, b := range batches {
		if len(byBatch[b.name]) == 0 {
			continue
		}
		if b.specTimeout == 0 {
			b.specTimeout = defaultSpecTimeout
		}
		p.batches = append(p.batches, plannedBatch{batch: b, suite: byBatch[b.name][0].suite, specs: byBatch[b.name]})
	}
	return p, nil
}

func skipOf(sp spec) (skip, bool) {
	for _, sk := range skips {
		if (sk.suite == "" || sk.suite == sp.suite.binary()) && sk.pattern.MatchString(sp.text) {
			return sk, true
		}
	}
	return skip{}, false
}

func batchOf(sp spec) (batch, bool) {
	for _, b := range batches {
		if b.suite == sp.suite.binary() && b.focus.MatchString(sp.text) {
			return b, true
		}
	}
	return batch{}, false
}

// focusOf is a ginkgo focus that matches exactly these specs (of one suite): ginkgo matches it
// against the suite's description, a space, and the spec's text.
func focusOf(specs []spec) string {
	quoted := make([]string, len(specs))
	for i, sp := range specs {
		quoted[i] = regexp.QuoteMeta(sp.text)
	}
	return "^" + regexp.QuoteMeta(specs[0].suiteText) + " (?:" + strings.Join(quoted, "|") + ")$"
}
