package service

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

func TestStartWiresAdminAndNATS(t *testing.T) {
	srv := bustest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt, err := Start(ctx, Options{Name: "pod-watcher", Common: Common{NATSOptions: NATSOptions{NATSURL: srv.ClientURL()}, AdminAddr: "127.0.0.1:0", Prefix: "fleetwright"}})
	require.NoError(t, err)
	defer rt.Close(ctx)

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + rt.Admin.Addr() + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, _ := get("/readyz")
	assert.Equal(t, http.StatusOK, code, "ready once NATS is connected")
	code, body := get("/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "go_goroutines", "runtime metrics are registered")
	assert.Regexp(t, `fleetwright_build_info\{commit="[^"]+",goversion="`+regexp.QuoteMeta(runtime.Version())+`",service="pod-watcher",version="dev"\} 1`, body,
		"the build is labelled on /metrics")

	// Streams were ensured: a publish on a work subject is acknowledged by JetStream.
	_, err = rt.Bus.JetStream().Publish(ctx, "fleetwright.pods.pending", []byte("x"))
	require.NoError(t, err)

	srv.Shutdown()
	require.Eventually(t, func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "nats")
	}, 10*time.Second, 50*time.Millisecond, "readyz names NATS once it is gone")
}

// TestNATSPasswordNeverReachesOutput starts a service against a server that wants a password,
// given each way a service takes it (NATS_USER with NATS_PASSWORD or --nats-password-file, as
// the Deployments do, or user info in NATS_URL), and fails to start with it: the password
// reaches the server, and never the log, an error or the -h text.
func TestNATSPasswordNeverReachesOutput(t *testing.T) {
	const pw = "s3cret-pw"
	srv := bustest.RunServerWithPassword(t, "scheduler", pw)
	pwFile := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(pwFile, []byte(pw+"\n"), 0o600))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stderr := os.Stderr
	os.Stderr = w
	defer func() { os.Stderr = stderr }()
	logged := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		logged <- b
	}()
	// start runs the service with the environment env and the arguments args, as main does.
	start := func(ctx context.Context, env map[string]string, args ...string) (*Runtime, error) {
		for _, k := range []string{"NATS_URL", "NATS_USER", "NATS_PASSWORD", "NATS_PASSWORD_FILE"} {
			t.Setenv(k, env[k])
		}
		var c Common
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		c.Register(fs, "127.0.0.1:0")
		require.NoError(t, fs.Parse(args))
		return Start(ctx, Options{Name: "test", Common: c})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	plain := "nats://" + srv.Addr().String()
	for name, env := range map[string]map[string]string{
		"NATS_USER and NATS_PASSWORD": {"NATS_URL": plain, "NATS_USER": "scheduler", "NATS_PASSWORD": pw},
		"NATS_PASSWORD_FILE":          {"NATS_URL": plain, "NATS_USER": "scheduler", "NATS_PASSWORD_FILE": pwFile},
		"in NATS_URL":                 {"NATS_URL": fmt.Sprintf("nats://scheduler:%s@%s", pw, srv.Addr())},
		"in NATS_URL without scheme":  {"NATS_URL": fmt.Sprintf("scheduler:%s@%s", pw, srv.Addr())},
	} {
		rt, err := start(ctx, env)
		require.NoError(t, err, "%s: the password reaches the server", name)
		rt.Close(ctx)
	}
	rt, err := start(ctx, map[string]string{"NATS_URL": plain}, "--nats-user", "scheduler", "--nats-password-file", pwFile)
	require.NoError(t, err, "--nats-user and --nats-password-file")
	rt.Close(ctx)

	var failed []error
	for _, env := range []map[string]string{
		{"NATS_URL": "nats://scheduler:" + pw + "@127.0.0.1:1"},
		{"NATS_URL": "nats://127.0.0.1:1", "NATS_USER": "scheduler", "NATS_PASSWORD": pw},
		{"NATS_URL": plain, "NATS_USER": "scheduler", "NATS_PASSWORD": "wrong-" + pw},
		{"NATS_URL": plain, "NATS_PASSWORD": pw},
		{"NATS_URL": plain, "NATS_USER": "scheduler", "NATS_PASSWORD": pw, "NATS_PASSWORD_FILE": pwFile},
	} {
		short, cancelShort := context.WithTimeout(context.Background(), time.Second)
		_, err := start(short, env)
		cancelShort()
		require.Error(t, err, "%v", env)
		failed = append(failed, err)
	}

	var help strings.Builder
	t.Setenv("NATS_URL", "nats://scheduler:"+pw+"@nats:4222")
	t.Setenv("NATS_PASSWORD", pw)
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(&help)
	new(Common).Register(fs, "127.0.0.1:0")
	fs.PrintDefaults()

	os.Stderr = stderr
	require.NoError(t, w.Close())
	out := <-logged
	assert.Contains(t, string(out), `"message":"starting"`)
	assert.Contains(t, string(out), `"nats":"nats://scheduler:***@`, "the start line shows the URL, masked")
	assert.NotContains(t, string(out), pw, "the log")
	for _, err := range failed {
		assert.NotContains(t, err.Error(), pw, "the error")
	}
	assert.Contains(t, failed[0].Error(), "nats://127.0.0.1:1")
	assert.Contains(t, failed[2].Error(), "Authorization Violation")
	assert.Contains(t, failed[3].Error(), "needs --nats-user")
	assert.Contains(t, failed[4].Error(), "give the password once")
	assert.Contains(t, help.String(), "nats://scheduler:***@nats:4222")
	assert.NotContains(t, help.String(), pw, "-h")
}

func TestStartFailsClearlyWithoutNATSAndFreesTheAdminPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Take a free port, release it, and give it to the service as its admin address.
	probe := bustest.RunServer(t)
	addr := probe.Addr().String()
	probe.Shutdown()
	probe.WaitForShutdown()
	_, err := Start(ctx, Options{Name: "test", Common: Common{NATSOptions: NATSOptions{NATSURL: "nats://127.0.0.1:1"}, AdminAddr: addr}})
	require.ErrorContains(t, err, "nats")
	// The failed start released its admin port: a second start can bind it.
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err, "admin port still held after a failed start")
	_ = l.Close()
}

func TestValidateAndEnvFallback(t *testing.T) {
	assert.ErrorContains(t, Common{AdminAddr: ":1"}.Validate(), "--nats-url is required")
	assert.ErrorContains(t, Common{NATSOptions: NATSOptions{NATSURL: "x", NATSCert: "c"}, AdminAddr: ":1"}.Validate(), "--nats-cert and --nats-key go together")
	assert.ErrorContains(t, Common{NATSOptions: NATSOptions{NATSURL: "x", NATSUser: "u", NATSCreds: "c"}, AdminAddr: ":1"}.Validate(), "two ways to log in")
	assert.ErrorContains(t, Common{NATSOptions: NATSOptions{NATSURL: "x", NATSPasswordFile: "f"}, AdminAddr: ":1"}.Validate(), "needs --nats-user")

	t.Setenv("NATS_URL", "nats://from-env:4222")
	t.Setenv("ADMIN_ADDR", "127.0.0.1:9999")
	var c Common
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.Register(fs, ":8080")
	require.NoError(t, fs.Parse(nil))
	assert.Equal(t, "nats://from-env:4222", c.NATSURL)
	assert.Equal(t, "127.0.0.1:9999", c.AdminAddr)
	require.NoError(t, fs.Parse([]string{"--nats-url", "nats://flag:4222"}))
	assert.Equal(t, "nats://flag:4222", c.NATSURL, "a flag beats the environment")

	t.Setenv("X_DUR", "3s")
	assert.Equal(t, 3*time.Second, EnvDuration("X_DUR", time.Second))
	t.Setenv("X_DUR", "bogus")
	assert.Equal(t, time.Second, EnvDuration("X_DUR", time.Second))
	assert.ErrorContains(t, EnvError(), `X_DUR="bogus"`, "and the bad value is reported")
	t.Setenv("X_DUR", "")
	EnvDuration("X_DUR", time.Second) // read again: unset, so nothing is reported
	require.NoError(t, EnvError())
}

// A value a user set that does not parse is refused at start with the variable named, never
// replaced by the default in silence; fixing it clears the error.
func TestMalformedEnvironmentIsRefused(t *testing.T) {
	t.Setenv("FW_TEST_GRACE", "20")
	assert.Equal(t, time.Minute, EnvDuration("FW_TEST_GRACE", time.Minute))
	valid := Common{NATSOptions: NATSOptions{NATSURL: "nats://x"}, AdminAddr: ":1"}
	assert.ErrorContains(t, valid.Validate(), `environment variable FW_TEST_GRACE="20" does not parse`)

	t.Setenv("FW_TEST_GRACE", "20s")
	assert.Equal(t, 20*time.Second, EnvDuration("FW_TEST_GRACE", time.Minute))
	assert.NoError(t, valid.Validate())

	t.Setenv("FW_TEST_BURST", "lots")
	EnvInt("FW_TEST_BURST", 100)
	assert.ErrorContains(t, valid.Validate(), "FW_TEST_BURST")
	t.Setenv("FW_TEST_BURST", "")
	assert.Equal(t, 100, EnvInt("FW_TEST_BURST", 100), "unset means the default")
	assert.NoError(t, valid.Validate())
}

// NATS_STREAM_REPLICAS reaches the streams Start ensures; a value the cluster cannot hold is
// refused before anything starts.
func TestStreamReplicasSetting(t *testing.T) {
	t.Setenv("NATS_STREAM_REPLICAS", "3")
	var c Common
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.Register(fs, "127.0.0.1:0")
	require.NoError(t, fs.Parse(nil))
	assert.Equal(t, 3, c.NATSStreamReplicas)
	bad := Common{NATSOptions: NATSOptions{NATSURL: "nats://x"}, AdminAddr: ":1", NATSStreamReplicas: 7}
	assert.ErrorContains(t, bad.Validate(), "--nats-stream-replicas must be 1 to 5")

	srvs := bustest.RunCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.NATSURL, c.Prefix = srvs[0].ClientURL(), "fleetwright"
	rt, err := Start(ctx, Options{Name: "pod-watcher", Common: c})
	require.NoError(t, err)
	defer rt.Close(ctx)
	s, err := rt.Bus.JetStream().Stream(ctx, "FLEETWRIGHT_PODS")
	require.NoError(t, err)
	assert.Equal(t, 3, s.CachedInfo().Config.Replicas)
}

// A service started before the owner of a stream it uses does not fail (no crash loop): it
// waits, /healthz answering and /readyz naming the missing streams and who creates them, and
// becomes ready once they exist. It creates none of them.
func TestStartWaitsForTheStreamsOthersCreate(t *testing.T) {
	streamWait = 20 * time.Millisecond
	t.Cleanup(func() { streamWait = 2 * time.Second })
	srv := bustest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := freeAddr(t)
	type started struct {
		rt  *Runtime
		err error
	}
	done := make(chan started, 1)
	go func() {
		rt, err := Start(ctx, Options{Name: subject.Terminator, Common: Common{NATSOptions: NATSOptions{NATSURL: srv.ClientURL()}, AdminAddr: admin, Prefix: "fleetwright"}})
		done <- started{rt, err}
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + admin + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.Eventually(t, func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "FLEETWRIGHT_LAUNCH (created by the launcher)")
	}, 10*time.Second, 20*time.Millisecond, "readyz names the stream the terminator waits for and its owner")
	code, _ := get("/healthz")
	assert.Equal(t, http.StatusOK, code, "alive while waiting")
	select {
	case s := <-done:
		t.Fatalf("Start returned before the launcher's streams exist: %v", s.err)
	default:
	}

	owner, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL(), Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	defer owner.Close()
	_, err = owner.JetStream().Stream(ctx, "FLEETWRIGHT_LAUNCH")
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "the terminator did not create the launcher's stream")
	_, err = owner.JetStream().Stream(ctx, "FLEETWRIGHT_TERMINATIONS")
	require.NoError(t, err, "the terminator created its own stream before waiting")
	require.NoError(t, owner.EnsureOwnStreams(ctx, subject.Launcher))

	var s started
	select {
	case s = <-done:
	case <-ctx.Done():
		t.Fatal("Start still waiting after the launcher made its streams")
	}
	require.NoError(t, s.err)
	defer s.rt.Close(ctx)
	code, body := get("/readyz")
	assert.Equal(t, http.StatusOK, code, body)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// --enable-profiling (env ENABLE_PROFILING) serves Go's profiles on the admin port; without it
// there are none, and a value that is not a bool is refused.
func TestProfilingOnTheAdminPort(t *testing.T) {
	srv := bustest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func(args ...string) *Runtime {
		var c Common
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		c.Register(fs, "127.0.0.1:0")
		require.NoError(t, fs.Parse(append([]string{"--nats-url", srv.ClientURL()}, args...)))
		rt, err := Start(ctx, Options{Name: "pod-watcher", Common: c})
		require.NoError(t, err)
		t.Cleanup(func() { rt.Close(ctx) })
		return rt
	}
	get := func(rt *Runtime, path string) (int, string) {
		resp, err := http.Get("http://" + rt.Admin.Addr() + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	off := start()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap"} {
		code, _ := get(off, path)
		assert.Equal(t, http.StatusNotFound, code, "%s without --enable-profiling", path)
	}

	on := start("--enable-profiling")
	code, body := get(on, "/debug/pprof/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine", "the index lists the profiles")
	code, body = get(on, "/debug/pprof/heap?debug=1")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "heap profile:")
	code, _ = get(on, "/metrics")
	assert.Equal(t, http.StatusOK, code, "the other endpoints are still there")

	t.Setenv("ENABLE_PROFILING", "true")
	code, _ = get(start(), "/debug/pprof/heap")
	assert.Equal(t, http.StatusOK, code, "ENABLE_PROFILING=true turns it on")

	t.Setenv("ENABLE_PROFILING", "yes please")
	var c Common
	c.Register(flag.NewFlagSet("test", flag.ContinueOnError), "127.0.0.1:0")
	c.NATSURL = srv.ClientURL()
	assert.ErrorContains(t, c.Validate(), `ENABLE_PROFILING="yes please" does not parse`)
	t.Setenv("ENABLE_PROFILING", "")
	EnvBool("ENABLE_PROFILING", false) // read again, unset: the error is gone for the tests after
	require.NoError(t, EnvError())
}
