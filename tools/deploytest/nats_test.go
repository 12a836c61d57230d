package deploytest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/subject"
)

var update = flag.Bool("update", false, "rewrite deploy/base/nats/auth.conf from NATSUsers")

// natsDir is deploy/base/nats in this repository.
func natsDir(t testing.TB) string { return filepath.Join(root(t), "deploy", "base", "nats") }

func TestAuthConfIsRendered(t *testing.T) {
	path := filepath.Join(natsDir(t), "auth.conf")
	want := RenderAuthConf(NATSUsers(subject.DefaultPrefix))
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, string(got), "auth.conf is stale: run go test ./deploytest -run TestAuthConfIsRendered -update")
}

// passwords sets a password for every user in the nats-server's environment, as the
// StatefulSet does from the Secret, and returns them by user.
func passwords(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, u := range NATSUsers(subject.DefaultPrefix) {
		pw := "pw-" + strings.ReplaceAll(u.Name, "-", "")
		t.Setenv(passwordEnv(u.Name), pw)
		out[u.Name] = pw
	}
	return out
}

// shippedServer starts an in-process nats-server with JetStream whose authorization is the
// shipped deploy/base/nats/auth.conf, included the way nats.conf includes it.
func shippedServer(t *testing.T) (url string, pw map[string]string) {
	t.Helper()
	pw = passwords(t)
	dir := t.TempDir()
	for _, f := range []string{"auth.conf", "tls.conf"} {
		b, err := os.ReadFile(filepath.Join(natsDir(t), f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
	}
	conf := fmt.Sprintf("host: 127.0.0.1\nport: -1\njetstream { store_dir: %q }\ninclude ./auth.conf\ninclude ./tls.conf\n",
		filepath.Join(dir, "js"))
	path := filepath.Join(dir, "server.conf")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	opts, err := server.ProcessConfigFile(path)
	require.NoError(t, err, "parsing the shipped auth.conf")
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second), "nats-server did not start")
	t.Cleanup(s.Shutdown)
	return s.ClientURL(), pw
}

// asyncErrors collects the server's asynchronous errors (permission violations) for one
// connection.
type asyncErrors struct {
	mu   sync.Mutex
	errs []error
}

func (a *asyncErrors) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs = append(a.errs, err)
}

func (a *asyncErrors) violations() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, err := range a.errs {
		if errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			out = append(out, err.Error())
		}
	}
	return out
}

// connectAs connects as a user, a service's with the service's inbox prefix.
func connectAs(t *testing.T, url, user, password string) (*nats.Conn, *asyncErrors) {
	t.Helper()
	errs := &asyncErrors{}
	opts := []nats.Option{nats.UserInfo(user, password), nats.ErrorHandler(errs.handler)}
	if user != "audit" {
		opts = append(opts, nats.CustomInboxPrefix(subject.Inbox(user))) // as pkg/service connects
	}
	nc, err := nats.Connect(url, opts...)
	require.NoError(t, err, "connecting as %s", user)
	t.Cleanup(nc.Close)
	return nc, errs
}

// TestServicePublishPermissions proves each service may publish what it owns and nothing else
// under the prefix: a publish outside its list is refused by the server with a permissions
// violation and never reaches a subscriber.
func TestServicePublishPermissions(t *testing.T) {
	url, pw := shippedServer(t)
	p := subject.DefaultPrefix
	// The streams exist, as the services ensure them at start.
	ensureStreams(t, url, pw)

	cases := []struct {
		user    string
		subject string
		allowed bool
	}{
		{"pod-watcher", p.Of(subject.PodsPending), true},
		{"pod-watcher", p.Of(subject.LaunchIntents), false},
		{"pod-watcher", p.Of(subject.TerminationsIntents), false},
		{"pod-watcher", p.DeadLetter(p.Of(subject.PodsPending)), false},
		{"scheduler", p.Of(subject.LaunchIntents), true},
		{"scheduler", p.DeadLetter(p.Of(subject.PodsPending)), true},
		{"scheduler", p.Of(subject.PodsPending), false},
		{"scheduler", p.Of(subject.LaunchResults), false},
		{"scheduler", p.Of(subject.TerminationsDecisions), true},
		{"scheduler", p.Of(subject.TerminationsResults), false},
		{"terminator", p.Of(subject.TerminationsDecisions), false},
		{"launcher", p.Of(subject.LaunchResults), true},
		{"launcher", p.Of(subject.OfferingsUnavailable), true},
		{"launcher", p.Of(subject.NodesEvents), true},
		{"launcher", p.Of(subject.LaunchIntents), false},
		{"launcher", p.Of(subject.TerminationsIntents), false},
		{"terminator", p.Interruptions(subject.InterruptionSpot), true},
		{"terminator", p.Of(subject.TerminationsIntents), true},
		{"terminator", p.Of(subject.TerminationsUrgent), true},
		{"scheduler", p.Of(subject.TerminationsUrgent), false},
		{"terminator", p.Of(subject.TerminationsResults), true},
		{"terminator", p.Of(subject.NodesEvents), true},
		{"terminator", p.Of(subject.LaunchIntents), false},
		{"terminator", p.Of(subject.PodsPending), false},
		{"audit", p.Of(subject.PodsPending), false},
		{"audit", p.Of(subject.LaunchIntents), false},
	}
	for _, tc := range cases {
		t.Run(tc.user+"/"+tc.subject, func(t *testing.T) {
			// A watcher with every right sees what actually got through.
			watcher, _ := connectAs(t, url, "audit", pw["audit"])
			seen, err := watcher.SubscribeSync(tc.subject)
			require.NoError(t, err)
			require.NoError(t, watcher.Flush())

			nc, errs := connectAs(t, url, tc.user, pw[tc.user])
			require.NoError(t, nc.Publish(tc.subject, []byte("probe")))
			require.NoError(t, nc.Flush())
			if tc.allowed {
				_, err := seen.NextMsg(5 * time.Second)
				require.NoError(t, err, "%s's publish to %s did not arrive", tc.user, tc.subject)
				require.Empty(t, errs.violations())
				// And JetStream stores it: the PubAck comes back.
				js, err := jetstream.New(nc)
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err = js.Publish(ctx, tc.subject, []byte("durable probe"))
				require.NoError(t, err)
				return
			}
			require.Eventually(t, func() bool { return len(errs.violations()) > 0 }, 5*time.Second, 10*time.Millisecond,
				"%s published to %s without a permissions violation", tc.user, tc.subject)
			require.Contains(t, strings.Join(errs.violations(), "\n"), tc.subject)
			_, err = seen.NextMsg(200 * time.Millisecond)
			require.ErrorIs(t, err, nats.ErrTimeout, "a refused publish reached a subscriber")
		})
	}
}

// TestServiceSubscribePermissions: a service cannot listen in on another's work.
func TestServiceSubscribePermissions(t *testing.T) {
	url, pw := shippedServer(t)
	p := subject.DefaultPrefix
	cases := []struct {
		user    string
		subject string
	}{
		{"pod-watcher", p.Of(subject.LaunchIntents)},
		{"pod-watcher", p.All()},
		{"launcher", p.Of(subject.PodsPending)},
		{"terminator", p.Of(subject.PodsPending)},
	}
	for _, tc := range cases {
		t.Run(tc.user+"/"+tc.subject, func(t *testing.T) {
			nc, errs := connectAs(t, url, tc.user, pw[tc.user])
			_, err := nc.SubscribeSync(tc.subject)
			require.NoError(t, err)
			require.NoError(t, nc.Flush())
			require.Eventually(t, func() bool { return len(errs.violations()) > 0 }, 5*time.Second, 10*time.Millisecond,
				"%s subscribed to %s without a permissions violation", tc.user, tc.subject)
		})
	}
}

// TestShippedNATSConfParses loads the StatefulSet's command line and nats.conf the way
// nats-server does (with the environment the pod gives it) and checks JetStream and the
// three-node cluster.
func TestShippedNATSConfParses(t *testing.T) {
	args, _ := natsPod(t, "local", "")
	opts := configure(t, args)
	require.True(t, opts.JetStream, "JetStream enabled")
	require.Equal(t, "/data/jetstream", opts.StoreDir)
	require.Equal(t, "nats-0", opts.ServerName)
	require.Equal(t, "fleetwright", opts.Cluster.Name)
	require.Len(t, opts.Routes, 3, "one route per StatefulSet replica")
	require.Len(t, opts.Users, len(NATSUsers(subject.DefaultPrefix)))
	for _, u := range opts.Users {
		require.NotEmpty(t, u.Password, "user %s has its password from the environment", u.Username)
		require.NotNil(t, u.Permissions, "user %s has permissions", u.Username)
	}
}

func ensureStreams(t *testing.T, url string, pw map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := subject.DefaultPrefix
	for _, key := range subject.Streams() {
		owner := subject.StreamOwner(key)
		nc, _ := connectAs(t, url, owner, pw[owner])
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: p.Stream(key), Subjects: []string{p.StreamSubjects(key)}})
		require.NoError(t, err, "%s creates %s", owner, key)
	}
}

// The NATS that deploy/ and docker-compose.yaml ship is the version every test runs
// in-process (the nats-server module in go.mod), so the shipped configuration and permissions
// are the ones proven here.
func TestShippedNATSVersionIsTheTestedOne(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(root(t), "tools", "go.mod"))
	require.NoError(t, err)
	req := regexp.MustCompile(`(?m)^\s*github\.com/nats-io/nats-server/v2 v([0-9.]+)\s*$`).FindSubmatch(mod)
	require.NotNil(t, req, "tools/go.mod requires the nats-server the tests run")
	tested := string(req[1])
	image := regexp.MustCompile(`image:\s*nats:([0-9.]+)`)
	for _, f := range []string{filepath.Join(natsDir(t), "statefulset.yaml"), filepath.Join(root(t), "docker-compose.yaml")} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		m := image.FindSubmatch(b)
		require.NotNil(t, m, "%s names a nats image", f)
		assert.Equal(t, tested, string(m[1]), "%s ships the nats-server version the tests run", f)
	}
}

// TestSimulateRequestReplyPermissions: the audit user (the operator CLI) may ask the scheduler
// to simulate and gets its answer; the scheduler may answer (one reply per request) but not
// publish to an inbox of its choosing; no other service may ask.
func TestSimulateRequestReplyPermissions(t *testing.T) {
	url, pw := shippedServer(t)
	subj := subject.DefaultPrefix.Of(subject.SchedulerSimulate)
	sched, schedErrs := connectAs(t, url, "scheduler", pw["scheduler"])
	_, err := sched.QueueSubscribe(subj, subject.SimulateQueue, func(m *nats.Msg) { _ = m.Respond([]byte("plan")) })
	require.NoError(t, err)
	require.NoError(t, sched.Flush())

	cli, cliErrs := connectAs(t, url, "audit", pw["audit"])
	reply, err := cli.Request(subj, []byte("workload"), 5*time.Second)
	require.NoError(t, err, "the CLI's request is answered")
	assert.Equal(t, "plan", string(reply.Data))
	assert.Empty(t, cliErrs.violations())
	assert.Empty(t, schedErrs.violations())

	// Answering is not a licence to publish to inboxes at will.
	require.NoError(t, sched.Publish("_INBOX.somebody-else", []byte("unasked")))
	require.NoError(t, sched.Flush())
	require.Eventually(t, func() bool { return len(schedErrs.violations()) > 0 }, 5*time.Second, 10*time.Millisecond,
		"the scheduler published to an inbox nobody asked it to answer")

	for _, user := range []string{"pod-watcher", "launcher", "terminator"} {
		nc, errs := connectAs(t, url, user, pw[user])
		_, err := nc.Request(subj, []byte("workload"), 500*time.Millisecond)
		require.Error(t, err, "%s may not ask for a simulation", user)
		require.Eventually(t, func() bool { return len(errs.violations()) > 0 }, 5*time.Second, 10*time.Millisecond, user)
	}
}

// Issue 31, item 6: each service's replies arrive on an inbox only its own user may read. A
// service does its JetStream work through its inbox; the pod-watcher's credentials may not
// subscribe to every inbox (_INBOX.>) nor to the launcher's, and read none of the launcher's
// replies.
func TestServiceInboxesArePrivate(t *testing.T) {
	url, pw := shippedServer(t)
	spy, spyErrs := connectAs(t, url, "pod-watcher", pw["pod-watcher"])
	for _, subj := range []string{"_INBOX.>", subject.Inbox(subject.Launcher) + ".>", ">"} {
		_, err := spy.SubscribeSync(subj)
		require.NoError(t, err)
		require.NoError(t, spy.Flush())
		require.Eventually(t, func() bool { return strings.Contains(strings.Join(spyErrs.violations(), "\n"), subj) },
			5*time.Second, 10*time.Millisecond, "the pod-watcher's user subscribed to %s without a permissions violation", subj)
	}
	// The launcher's JetStream work is answered on its own inbox, and the pod-watcher's
	// subscriptions see none of it.
	ensureStreams(t, url, pw)
	own, err := spy.SubscribeSync(subject.Inbox(subject.PodWatcher) + ".>")
	require.NoError(t, err)
	require.NoError(t, spy.Flush())
	launcher, launcherErrs := connectAs(t, url, "launcher", pw["launcher"])
	js, err := jetstream.New(launcher)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = js.Publish(ctx, subject.DefaultPrefix.Of(subject.LaunchResults), []byte("result"))
	require.NoError(t, err, "the launcher's PubAck arrives on its inbox")
	_, err = js.Stream(ctx, subject.DefaultPrefix.Stream(subject.StreamLaunch))
	require.NoError(t, err, "the launcher's JetStream API answer arrives on its inbox")
	assert.Empty(t, launcherErrs.violations())
	_, err = own.NextMsg(300 * time.Millisecond)
	assert.ErrorIs(t, err, nats.ErrTimeout, "the pod-watcher's own inbox saw nothing of the launcher's")
}
