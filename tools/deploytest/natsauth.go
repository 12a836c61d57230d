// Package deploytest checks what deploy/ and docker-compose.yaml ship: the NATS users and their
// subject permissions (against a real in-process nats-server), the kustomize overlays (rendered,
// then applied with server-side dry-run to the local control plane), the CloudFormation
// template's IAM policies, the compose file and the audit stream.
//
// It also holds the one table the NATS permissions come from: NATSUsers. The shipped file
// deploy/base/nats/auth.conf is RenderAuthConf(NATSUsers(subject.DefaultPrefix)); a test fails
// when the two differ, and `go test ./deploytest -run TestAuthConfIsRendered -update` rewrites
// the file after the table changes.
package deploytest

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fleetwright/fleetwright/pkg/subject"
)

// NATSUser is one NATS login and what it may do.
type NATSUser struct {
	Name      string   // login, also the key of the password in the Secret fleetwright-nats-users
	Comment   string   // why it has what it has
	Publish   []string // subjects it may publish to (JetStream API subjects included)
	Subscribe []string // subjects it may subscribe to
	Deny      []string // subjects it may not publish to even where Publish allows them
	// AllowResponses lets it publish one reply to the reply subject of each request it
	// receives (a responder: the scheduler answering simulate), without a publish right on
	// every inbox.
	AllowResponses bool
}

// durable is a named JetStream consumer and the service whose it is.
type durable struct{ stream, name, owner string }

// durables are the services' durable consumers (grep `Durable:` in services/). Two services
// read some streams (interruptions: scheduler and terminator; launch: launcher and terminator),
// so readStream alone would let one create, delete or drain the other's consumer.
func durables(p subject.Prefix) []durable {
	return []durable{
		{p.Stream(subject.StreamPods), "scheduler", "scheduler"},
		{p.Stream(subject.StreamInterruptions), "scheduler-interruptions", "scheduler"},
		{p.Stream(subject.StreamLaunch), "launcher", "launcher"},
		{p.Stream(subject.StreamTerminations), "terminator", "terminator"},
		{p.Stream(subject.StreamTerminations), "terminator-urgent", "terminator"},
		{p.Stream(subject.StreamInterruptions), "terminator-interruptions", "terminator"},
	}
}

// foreignConsumers denies user every consumer operation but INFO on the durables of other
// services on the streams it reads: creating or updating, deleting, pulling and acknowledging.
func foreignConsumers(p subject.Prefix, user string, reads []string) []string {
	var out []string
	for _, d := range durables(p) {
		if d.owner == user || !slices.Contains(reads, d.stream) {
			continue
		}
		c := d.stream + "." + d.name
		out = append(out,
			"$JS.API.CONSUMER.CREATE."+c, "$JS.API.CONSUMER.CREATE."+c+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+c,
			"$JS.API.CONSUMER.DELETE."+c,
			"$JS.API.CONSUMER.MSG.NEXT."+c,
			"$JS.ACK."+c+".>",
		)
	}
	return out
}

// catalogStream is the JetStream stream behind the catalog key-value bucket.
func catalogStream(p subject.Prefix) string { return "KV_" + p.CatalogBucket() }

// manageStreams lets a service create, update and inspect the streams it owns
// (subject.OwnedStreams, and the catalog bucket for subject.CatalogOwner) and only inspect the
// others it uses (subject.StreamsUsed, subject.ReadsCatalog): at start it ensures its own with
// bus.EnsureOwnStreams and waits for the others with bus.WaitForStreams. So no service can
// change another's stream, and none the audit stream, which would shorten the audit trail.
func manageStreams(p subject.Prefix, service string) []string {
	out := []string{"$JS.API.INFO", "$JS.API.STREAM.NAMES"}
	manage := func(s string) {
		for _, op := range []string{"CREATE", "UPDATE", "INFO"} {
			out = append(out, "$JS.API.STREAM."+op+"."+s)
		}
	}
	for _, key := range subject.OwnedStreams(service) {
		manage(p.Stream(key))
	}
	if service == subject.CatalogOwner {
		manage(catalogStream(p))
	}
	for _, key := range subject.StreamsUsed(service) {
		out = append(out, "$JS.API.STREAM.INFO."+p.Stream(key))
	}
	if subject.ReadsCatalog(service) {
		out = append(out, "$JS.API.STREAM.INFO."+catalogStream(p))
	}
	return out
}

// readStream lets a user run consumers (durable or ordered) on one stream: create, inspect and
// delete them, fetch, acknowledge, answer flow control, and read single messages directly.
func readStream(stream string) []string {
	return []string{
		"$JS.API.CONSUMER.CREATE." + stream,
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.INFO." + stream + ".>",
		"$JS.API.CONSUMER.DELETE." + stream + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".>",
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.ACK." + stream + ".>",
		"$JS.FC." + stream + ".>",
	}
}

// inboxOf is where JetStream API replies, PubAcks, pushed KV watch messages and request
// replies arrive for a service: its own inbox prefix (subject.Inbox, set by pkg/service), so
// no other service's user can read them.
func inboxOf(service string) string { return subject.Inbox(service) + ".>" }

// auditInbox is the operator CLI's: nats.go's default prefix. The audit user reads every
// Fleetwright subject anyway; the services' replies are not under it.
const auditInbox = "_INBOX.>"

// NATSUsers is the permission table: one user per service plus the audit user (the operator CLI
// and the audit-stream job). Each service may publish exactly the subjects it produces, plus the
// dead-letter subjects of what it consumes.
func NATSUsers(p subject.Prefix) []NATSUser {
	join := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	return []NATSUser{
		{
			Name:      "pod-watcher",
			Comment:   "publishes pending-pod batches and nothing else",
			Publish:   join([]string{p.Of(subject.PodsPending)}, manageStreams(p, subject.PodWatcher)),
			Subscribe: []string{inboxOf(subject.PodWatcher)},
		},
		{
			Name: "scheduler",
			Comment: "consumes batches and interruption events, follows unavailable offerings and the " +
				"catalog, publishes launch intents, interrupted spot offerings, and the record (decided, " +
				"terminating, abandoned, blocked) of its disruption decisions (which it hands to the " +
				"terminator by deleting NodeClaims, not by message); answers simulate requests (one reply each)",
			Publish: join([]string{
				p.Of(subject.LaunchIntents),
				p.Of(subject.TerminationsDecisions),
				p.Of(subject.OfferingsUnavailable),
				p.DeadLetter(p.Of(subject.PodsPending)),
				p.DeadLetter(p.AllInterruptions()),
			}, manageStreams(p, subject.Scheduler), readStream(p.Stream(subject.StreamPods)), readStream(p.Stream(subject.StreamOfferings)),
				readStream(p.Stream(subject.StreamInterruptions)), readStream(catalogStream(p))),
			Deny: foreignConsumers(p, "scheduler", []string{p.Stream(subject.StreamPods), p.Stream(subject.StreamOfferings),
				p.Stream(subject.StreamInterruptions), catalogStream(p)}),
			Subscribe:      []string{inboxOf(subject.Scheduler), p.Of(subject.SchedulerSimulate)},
			AllowResponses: true,
		},
		{
			Name: "launcher",
			Comment: "consumes launch intents, follows unavailable offerings, publishes results, " +
				"unavailable offerings, node events and the catalog",
			Publish: join([]string{
				p.Of(subject.LaunchResults),
				p.Of(subject.OfferingsUnavailable),
				p.Of(subject.NodesEvents),
				p.DeadLetter(p.Of(subject.LaunchIntents)),
				"$KV." + p.CatalogBucket() + ".>",
			}, manageStreams(p, subject.Launcher), readStream(p.Stream(subject.StreamLaunch)), readStream(p.Stream(subject.StreamOfferings)),
				readStream(catalogStream(p))),
			Deny: foreignConsumers(p, "launcher", []string{p.Stream(subject.StreamLaunch), p.Stream(subject.StreamOfferings),
				catalogStream(p)}),
			Subscribe: []string{inboxOf(subject.Launcher)},
		},
		{
			Name: "terminator",
			Comment: "bridges SQS interruptions, decides and carries out terminations (interruptions on " +
				"terminations.urgent, the rest on terminations.intents), publishing node events; reads launch " +
				"results and node events",
			Publish: join([]string{
				p.AllInterruptions(),
				p.Of(subject.TerminationsIntents),
				p.Of(subject.TerminationsUrgent),
				p.Of(subject.TerminationsResults),
				p.Of(subject.NodesEvents),
				p.DeadLetter(p.AllInterruptions()),
				p.DeadLetter(p.Of(subject.TerminationsIntents)),
				p.DeadLetter(p.Of(subject.TerminationsUrgent)),
				p.DeadLetter(p.Of(subject.LaunchResults)),
				p.DeadLetter(p.Of(subject.NodesEvents)),
			}, manageStreams(p, subject.Terminator), readStream(p.Stream(subject.StreamInterruptions)), readStream(p.Stream(subject.StreamTerminations)),
				readStream(p.Stream(subject.StreamLaunch)), readStream(p.Stream(subject.StreamNodes))),
			Deny: foreignConsumers(p, "terminator", []string{p.Stream(subject.StreamInterruptions), p.Stream(subject.StreamTerminations),
				p.Stream(subject.StreamLaunch), p.Stream(subject.StreamNodes)}),
			Subscribe: []string{inboxOf(subject.Terminator)},
		},
		{
			Name: "audit",
			Comment: "the operator CLI (tools/fleetwright: tap, why, simulate, deadletters ls) and the job " +
				"that keeps the audit stream; reads everything, publishes no Fleetwright subject but the " +
				"simulate request the scheduler answers",
			Publish: join([]string{
				p.Of(subject.SchedulerSimulate),
				"$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST",
				"$JS.API.STREAM.CREATE." + AuditStream(p),
				"$JS.API.STREAM.UPDATE." + AuditStream(p),
				"$JS.API.STREAM.INFO." + AuditStream(p),
			}, readStream(AuditStream(p))),
			Subscribe: []string{p.All(), auditInbox},
		},
	}
}

// AuditStream is the name of the stream that keeps every Fleetwright message for auditing.
func AuditStream(p subject.Prefix) string { return p.Stream("AUDIT") }

// passwordEnv is the nats-server environment variable holding a user's password.
func passwordEnv(user string) string {
	return "NATS_PASSWORD_" + strings.ToUpper(strings.ReplaceAll(user, "-", "_"))
}

// RenderAuthConf renders the users as a nats-server configuration block.
func RenderAuthConf(users []NATSUser) string {
	var b strings.Builder
	b.WriteString("# Generated from tools/deploytest/natsauth.go (NATSUsers); do not edit by hand.\n")
	b.WriteString("# Regenerate: cd tools && go test ./deploytest -run TestAuthConfIsRendered -update\n")
	b.WriteString("#\n# One user per service. Passwords come from the Secret fleetwright-nats-users through the\n")
	b.WriteString("# environment of the nats-server (see statefulset.yaml). A user may publish and subscribe\n")
	b.WriteString("# only to the subjects listed; everything else is a permissions violation.\n")
	b.WriteString("authorization {\n  users = [\n")
	for _, u := range users {
		fmt.Fprintf(&b, "    # %s: %s\n", u.Name, u.Comment)
		fmt.Fprintf(&b, "    {\n      user: %q\n      password: $%s\n      permissions: {\n", u.Name, passwordEnv(u.Name))
		writeList(&b, "publish", u.Publish, u.Deny)
		writeList(&b, "subscribe", u.Subscribe, nil)
		if u.AllowResponses {
			b.WriteString("        allow_responses: true\n")
		}
		b.WriteString("      }\n    }\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

func writeList(b *strings.Builder, name string, allow, deny []string) {
	fmt.Fprintf(b, "        %s: {\n", name)
	for _, l := range []struct {
		key      string
		subjects []string
	}{{"allow", allow}, {"deny", deny}} {
		if len(l.subjects) == 0 {
			continue
		}
		list := append([]string(nil), l.subjects...)
		sort.Strings(list)
		fmt.Fprintf(b, "          %s: [\n", l.key)
		for _, s := range list {
			fmt.Fprintf(b, "            %q\n", s)
		}
		b.WriteString("          ]\n")
	}
	b.WriteString("        }\n")
}
