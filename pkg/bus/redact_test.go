package bus_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
)

// secret is in every password and token these tests use: it must never be printed.
const secret = "s3cret"

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"nats://scheduler:s3cret@nats:4222":               "nats://scheduler:***@nats:4222",
		"tls://a:s3cret@h1:4222, nats://h2:4222":          "tls://a:***@h1:4222,nats://h2:4222",
		"scheduler:s3cret@127.0.0.1:4222":                 "nats://scheduler:***@127.0.0.1:4222", // nats.go adds nats://
		"nats://s3cret@h:4222":                            "nats://***@h:4222",                   // a token
		"nats://u:s3/cret@h:4222":                         "nats://u:***@h:4222",                 // an unescaped "/"
		"nats://u:s3@cret@h:4222":                         "nats://u:***@h:4222",                 // an unescaped "@"
		"nats://u:s3cret,x@h:4222":                        "<invalid url>,nats://***@h:4222",     // an unescaped ","
		"nats://u:s3cret%zz@h:4222":                       "nats://u:***@h:4222",                 // a bad escape
		"nats://nats.fleetwright.svc:4222":                "nats://nats.fleetwright.svc:4222",
		"127.0.0.1:4222":                                  "nats://127.0.0.1:4222",
		"nats://u:s3cret@h1:4222,nats://u:s3cret@h2:4222": "nats://u:***@h1:4222,nats://u:***@h2:4222",
	} {
		got := bus.Redact(in)
		assert.Equal(t, want, got, in)
		assert.NotContains(t, got, "s3", in)
	}
}

// TestFlagDefaultIsRedacted: -h prints a flag's default, which services take from NATS_URL.
func TestFlagDefaultIsRedacted(t *testing.T) {
	url := "nats://scheduler:s3cret@nats:4222"
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Var(bus.URLFlag(&url), "nats-url", "NATS server URL(s)")
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	assert.Contains(t, help.String(), "nats://scheduler:***@nats:4222")
	assert.NotContains(t, help.String(), secret)
	require.NoError(t, fs.Parse([]string{"--nats-url", "nats://u:other@h:4222"}))
	assert.Equal(t, "nats://u:other@h:4222", url, "the flag sets the real URL")
}

// TestConnectNeverShowsThePassword connects to a server that wants a password, with the
// password in every way the services take it, and fails to connect in every way that names
// the server: the password reaches the server, and neither the logs, nor an error, nor the
// URLs the client keeps ever hold it.
func TestConnectNeverShowsThePassword(t *testing.T) {
	const pw = "pw-" + secret
	srv := bustest.RunServerWithPassword(t, "scheduler", pw)
	addr := srv.Addr().String()
	pwFile := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(pwFile, []byte(pw+"\n"), 0o600))
	logs := &bustest.Buffer{}
	log := zerolog.New(logs)
	connect := func(ctx context.Context, cfg bus.Config) (*bus.Conn, error) {
		cfg.Logger, cfg.Registerer = &log, prometheus.NewRegistry()
		return bus.Connect(ctx, cfg)
	}

	for name, cfg := range map[string]bus.Config{
		"in the URL":                    {URL: "nats://scheduler:" + pw + "@" + addr},
		"in a URL without a scheme":     {URL: "scheduler:" + pw + "@" + addr},
		"in one of two URLs":            {URL: "nats://127.0.0.1:1, nats://scheduler:" + pw + "@" + addr},
		"as user and password":          {URL: "nats://" + addr, User: "scheduler", Password: pw},
		"from a password file":          {URL: "nats://" + addr, User: "scheduler", PasswordFile: pwFile},
		"the same in the URL and apart": {URL: "nats://scheduler:" + pw + "@" + addr, User: "scheduler", Password: pw},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			c, err := connect(ctx, cfg)
			require.NoError(t, err, "the password reaches the server")
			assert.NotContains(t, c.NATS().ConnectedUrl(), secret)
			assert.NotContains(t, c.NATS().Servers(), secret)
			require.NoError(t, c.Close())
		})
	}

	for name, tc := range map[string]struct {
		cfg  bus.Config
		want string // in the error
	}{
		"wrong password in the URL":     {bus.Config{URL: "nats://scheduler:wrong-" + secret + "@" + addr}, "Authorization Violation"},
		"unreachable server":            {bus.Config{URL: "nats://scheduler:" + pw + "@127.0.0.1:1"}, "nats://127.0.0.1:1"},
		"unreachable, without a scheme": {bus.Config{URL: "scheduler:" + pw + "@127.0.0.1:1"}, "nats://127.0.0.1:1"},
		"unreachable, apart":            {bus.Config{URL: "nats://127.0.0.1:1", User: "scheduler", Password: pw}, "nats://127.0.0.1:1"},
		"badly escaped password":        {bus.Config{URL: "nats://scheduler:" + secret + "%zz@" + addr}, "user info is not valid"},
		"unescaped slash":               {bus.Config{URL: "nats://scheduler:12/" + secret + "@" + addr}, "no path"},
		"unescaped comma":               {bus.Config{URL: "nats://scheduler:" + secret + ",x@" + addr}, "NATS URL 1 of 2"},
		"URL and user disagree": {bus.Config{URL: "nats://scheduler:" + pw + "@" + addr, User: "launcher", Password: "other"},
			"give them once"},
		"URLs disagree": {bus.Config{URL: "nats://scheduler:" + pw + "@" + addr + ",nats://launcher:x-" + secret + "@" + addr},
			"different credentials"},
		"password and creds file": {bus.Config{URL: "nats://" + addr, User: "scheduler", Password: pw, CredsFile: "/nonexistent.creds"},
			"give one"},
		"password and password file": {bus.Config{URL: "nats://" + addr, User: "scheduler", Password: pw, PasswordFile: pwFile},
			"give one"},
		"password without a user":         {bus.Config{URL: "nats://" + addr, Password: pw}, "without a user"},
		"token where a password is asked": {bus.Config{URL: "nats://" + secret + "@" + addr}, "Authorization Violation"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := connect(ctx, tc.cfg)
			require.Error(t, err)
			assert.NotContains(t, err.Error(), secret)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	assert.NotContains(t, logs.String(), secret, "the logs")
}

// A URL's user without a password is a token, as nats.go takes it.
func TestConnectWithTokenInURL(t *testing.T) {
	srv := bustest.RunServerWith(t, func(o *server.Options) { o.Authorization = "tok-" + secret })
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := bus.Connect(ctx, bus.Config{URL: "nats://tok-" + secret + "@" + srv.Addr().String(), Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	assert.NotContains(t, c.NATS().ConnectedUrl(), secret)
	require.NoError(t, c.Close())
}
