package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every spec is skipped with a reason or run in a batch; one in neither stops the plan, so a new
// release's specs cannot go unrun unnoticed.
func TestPlanPlacesEverySpec(t *testing.T) {
	reg, strict := suites[0], suites[1]
	specs := []spec{
		{suite: reg, text: "Integration Validation NodePool should error when X", suiteText: "Regression"},
		{suite: reg, text: "CapacityBuffer Lifecycle should scale", suiteText: "Regression"},
		{suite: strict, text: "Scheduling Provisioning should provision a node for naked pods", suiteText: "SchedulingStrict"},
	}
	p, err := makePlan(specs, nil)
	require.NoError(t, err)
	require.Contains(t, p.skipped, specs[1])
	require.Equal(t, missingFeature, p.skipped[specs[1]].kind)
	var names []string
	for _, b := range p.batches {
		names = append(names, b.name)
		require.NotZero(t, b.specTimeout, b.name)
	}
	require.Equal(t, []string{"validation", "strict"}, names)

	_, err = makePlan(append(specs, spec{suite: reg, text: "Brand New Feature should work", suiteText: "Regression"}), nil)
	require.ErrorContains(t, err, "Brand New Feature should work")
}

// Every skip says why, and names a missing feature or a local-stack limit; every batch runs a
// suite that exists.
func TestSkipsAndBatchesAreComplete(t *testing.T) {
	for _, sk := range skips {
		require.Contains(t, []skipKind{missingFeature, localLimit}, sk.kind, sk.pattern.String())
		require.NotEmpty(t, strings.TrimSpace(sk.reason), sk.pattern.String())
	}
	for _, b := range batches {
		require.True(t, slices.ContainsFunc(suites, func(s suite) bool { return s.binary() == b.suite }), b.name)
	}
}

// The focus ginkgo gets matches the suite's description and exactly the batch's specs' texts,
// metacharacters and all.
func TestFocusMatchesExactlyTheSpecs(t *testing.T) {
	specs := []spec{
		{text: "Scheduling Labels should support well-known labels for a gpu (nvidia)", suiteText: "SchedulingStrict"},
		{text: "Scheduling Provisioning should provision a right-sized node when a pod has InitContainers (cpu) sidecar requirements + later init requirements do exceed container requirements", suiteText: "SchedulingStrict"},
	}
	re := regexp.MustCompile(focusOf(specs))
	for _, sp := range specs {
		require.True(t, re.MatchString("SchedulingStrict "+sp.text), sp.text)
		require.False(t, re.MatchString("SchedulingStrict "+sp.text+" too"), sp.text)
		require.False(t, re.MatchString(sp.text), "without the suite's description")
	}
	require.False(t, re.MatchString("SchedulingStrict Scheduling Labels should support well-known labels for a gpu Xnvidia)"))
}
