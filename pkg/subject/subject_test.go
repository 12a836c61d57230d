package subject

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePrefix(t *testing.T) {
	tests := []struct {
		in      string
		want    Prefix
		wantErr string
	}{
		{in: "", want: DefaultPrefix},
		{in: "fleetwright", want: "fleetwright"},
		{in: "staging.fleet-wright_2", want: "staging.fleet-wright_2"},
		{in: "fleet.*", wantErr: `character '*'`},
		{in: "fleet.>", wantErr: `character '>'`},
		{in: "fleet wright", wantErr: `character ' '`},
		{in: "fleet..wright", wantErr: "token 2 is empty"},
		{in: ".fleet", wantErr: "token 1 is empty"},
		{in: "fleet.", wantErr: "token 2 is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePrefix(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "invalid subject prefix")
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.NoError(t, got.Validate())
		})
	}
	assert.Error(t, Prefix("").Validate())
}

func TestBuilders(t *testing.T) {
	p := Prefix("fw.test")
	tests := []struct {
		name, got, want string
	}{
		{"pods pending", p.Of(PodsPending), "fw.test.pods.pending"},
		{"launch intents", p.Of(LaunchIntents), "fw.test.launch.intents"},
		{"launch results", p.Of(LaunchResults), "fw.test.launch.results"},
		{"offerings", p.Of(OfferingsUnavailable), "fw.test.offerings.unavailable"},
		{"nodes", p.Of(NodesEvents), "fw.test.nodes.events"},
		{"terminations intents", p.Of(TerminationsIntents), "fw.test.terminations.intents"},
		{"terminations urgent", p.Of(TerminationsUrgent), "fw.test.terminations.urgent"},
		{"terminations results", p.Of(TerminationsResults), "fw.test.terminations.results"},
		{"terminations decisions", p.Of(TerminationsDecisions), "fw.test.terminations.decisions"},
		{"scheduler simulate", p.Of(SchedulerSimulate), "fw.test.scheduler.simulate"},
		{"interruption", p.Interruptions(InterruptionSpot), "fw.test.interruptions.spot"},
		{"all interruptions", p.AllInterruptions(), "fw.test.interruptions.*"},
		{"deadletter", p.DeadLetter("fw.test.launch.intents"), "fw.test.deadletter.launch.intents"},
		{"deadletter foreign", p.DeadLetter("other.x"), "fw.test.deadletter.other.x"},
		{"all deadletters", p.AllDeadLetters(), "fw.test.deadletter.>"},
		{"all", p.All(), "fw.test.>"},
		{"stream", p.Stream(StreamLaunch), "FW_TEST_LAUNCH"},
		{"stream subjects", p.StreamSubjects(StreamInterruptions), "fw.test.interruptions.>"},
		{"unknown stream subjects", p.StreamSubjects("NOPE"), ""},
		{"catalog bucket", p.CatalogBucket(), "fw_test-catalog"},
		{"default bucket", DefaultPrefix.CatalogBucket(), "fleetwright-catalog"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestEveryStreamHasSubjects(t *testing.T) {
	seen := map[string]bool{}
	for _, key := range Streams() {
		subj := DefaultPrefix.StreamSubjects(key)
		require.NotEmpty(t, subj, key)
		assert.False(t, seen[subj], "two streams capture %s", subj)
		seen[subj] = true
	}
	// Request/reply must stay outside every stream, or the stream would answer it.
	for _, key := range Streams() {
		assert.NotEqual(t, "fleetwright.scheduler.>", DefaultPrefix.StreamSubjects(key))
	}
}

func TestValidateSubject(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"fleetwright.pods.pending", true},
		{"", false},
		{"a..b", false},
		{"a.*", false},
		{"a.>", false},
		{"a.b c", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			err := ValidateSubject(tt.in)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

// Disruption decisions are kept by the TERMINATIONS stream (so the audit stream, which sources
// every work stream, keeps them too) and are not what the terminator's workers consume.
func TestDecisionsLiveInTheTerminationsStream(t *testing.T) {
	p := Prefix("fw.test")
	root := strings.TrimSuffix(p.StreamSubjects(StreamTerminations), ">")
	assert.True(t, strings.HasPrefix(p.Of(TerminationsDecisions), root), "%s is under %s>", p.Of(TerminationsDecisions), root)
	assert.NotEqual(t, p.Of(TerminationsIntents), p.Of(TerminationsDecisions))
	// So are the interruptions' intents, on a subject the voluntary intents' consumer does not see.
	assert.True(t, strings.HasPrefix(p.Of(TerminationsUrgent), root), "%s is under %s>", p.Of(TerminationsUrgent), root)
	assert.NotEqual(t, p.Of(TerminationsIntents), p.Of(TerminationsUrgent))
}

// Every stream has one owner among the services; no service waits for a stream it owns; and
// started one after another in the order the owners allow, each finds what it uses.
func TestStreamOwners(t *testing.T) {
	services := []string{PodWatcher, Launcher, Terminator, Scheduler}
	made := map[string]bool{}
	for _, svc := range services {
		for _, key := range StreamsUsed(svc) {
			assert.NotEqual(t, svc, StreamOwner(key), "%s waits for its own %s", svc, key)
			assert.True(t, made[key], "%s uses %s, which the %s, started later, creates", svc, key, StreamOwner(key))
		}
		for _, key := range OwnedStreams(svc) {
			made[key] = true
		}
	}
	for _, key := range Streams() {
		assert.Contains(t, services, StreamOwner(key), "%s has an owner", key)
	}
	assert.Contains(t, services, CatalogOwner)
	assert.False(t, ReadsCatalog(CatalogOwner))
}
