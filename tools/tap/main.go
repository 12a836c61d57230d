// Command tap prints every Fleetwright message on NATS as one JSON line:
// subject, time, headers, message type and the payload decoded from
// protobuf. It is a plain subscription to "<prefix>.>", so it audits traffic
// without taking work from any consumer. A payload it cannot decode is
// printed with an "error" field and the bytes in base64.
//
//	go run ./tap --nats-url nats://127.0.0.1:4222 | jq .
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "tap:", err)
		os.Exit(1)
	}
}

type config struct {
	url          string
	user         string
	password     string // from env NATS_PASSWORD only: never a flag, which ps and -h show
	passwordFile string
	prefix       string
	creds        string
	caFile       string
	subject      string
}

func parseConfig(args []string, stderr io.Writer) (config, error) {
	cfg := config{url: envOr("NATS_URL", "nats://127.0.0.1:4222"), password: os.Getenv("NATS_PASSWORD")}
	fs := flag.NewFlagSet("tap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(bus.URLFlag(&cfg.url), "nats-url", "NATS server `URL`(s), comma separated; shown with any password masked (env NATS_URL)")
	fs.StringVar(&cfg.user, "nats-user", os.Getenv("NATS_USER"), "NATS user, whose password is in env NATS_PASSWORD or --nats-password-file (env NATS_USER)")
	fs.StringVar(&cfg.passwordFile, "nats-password-file", os.Getenv("NATS_PASSWORD_FILE"), "file holding the NATS user's password (env NATS_PASSWORD_FILE)")
	fs.StringVar(&cfg.prefix, "prefix", envOr("FLEETWRIGHT_PREFIX", string(subject.DefaultPrefix)), "subject prefix (env FLEETWRIGHT_PREFIX)")
	fs.StringVar(&cfg.creds, "creds", os.Getenv("NATS_CREDS"), "NATS credentials file (env NATS_CREDS)")
	fs.StringVar(&cfg.caFile, "tls-ca", os.Getenv("NATS_TLS_CA"), "CA file to verify the server (env NATS_TLS_CA)")
	fs.StringVar(&cfg.subject, "subject", "", `subject to tap instead of "<prefix>.>"`)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	prefix, err := subject.ParsePrefix(cfg.prefix)
	if err != nil {
		return cfg, err
	}
	if cfg.subject == "" {
		cfg.subject = prefix.All()
	}
	return cfg, nil
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

// run taps until ctx ends: messages as JSON lines on stdout, what it is doing on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := bus.Connect(cctx, bus.Config{
		URL:          cfg.url,
		User:         cfg.user,
		Password:     cfg.password,
		PasswordFile: cfg.passwordFile,
		CredsFile:    cfg.creds,
		TLS:          bus.TLSConfig{CA: cfg.caFile},
		Name:         "fleetwright-tap",
		Prefix:       cfg.prefix,
		Registerer:   prometheus.NewRegistry(),
	})
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()

	tap, err := Start(conn.NATS(), cfg.subject, stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "tap: listening on %s at %s\n", cfg.subject, bus.Redact(cfg.url))
	return tap.Run(ctx)
}
