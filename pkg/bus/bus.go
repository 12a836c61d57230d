// Package bus is Fleetwright's messaging layer over NATS JetStream: connect,
// declare streams and durable pull consumers, publish protobuf messages with
// de-duplication ids and W3C trace context, consume them with typed handlers
// that ack, retry with backoff or dead-letter, and call request/reply
// services. See README.md for the flow.
package bus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/fleetwright/fleetwright/pkg/subject"
)

const instrumentationName = "github.com/fleetwright/fleetwright/pkg/bus"

// Config says how to reach NATS. Only URL is required.
type Config struct {
	// URL of one or more servers, comma separated, e.g. "nats://nats:4222". A URL may carry
	// user:password@ (or token@); the client takes them out and never shows them (see Redact).
	URL string
	// User and Password log in as a NATS user (nats.UserInfo), instead of user info in URL.
	User     string
	Password string
	// PasswordFile holds the password instead of Password (one line; a trailing newline is
	// dropped), e.g. a mounted Secret.
	PasswordFile string
	// CredsFile is a NATS .creds file (JWT + nkey seed); empty for none.
	CredsFile string
	// TLS configures server verification and client certificates.
	TLS TLSConfig
	// Name identifies this client in the server's connection list.
	Name string
	// InboxPrefix is where the replies this client waits for arrive (JetStream's API answers and
	// acks, fetched messages, key-value watches, request replies): subject.Inbox of the service,
	// which its NATS user alone may read; empty means nats.go's shared _INBOX.
	InboxPrefix string
	// Prefix of all subjects; empty means subject.DefaultPrefix.
	Prefix string
	// StreamReplicas is how many servers hold each stream and the catalog
	// bucket that EnsureOwnStreams creates; zero means 1. It must not exceed the
	// servers in the NATS cluster. An existing stream with more keeps them.
	StreamReplicas int

	// Logger receives connection events and consumer errors; nil logs nothing.
	Logger *zerolog.Logger
	// Registerer receives the bus metrics; nil means prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	// TracerProvider makes producer and consumer spans; nil means the global one.
	TracerProvider trace.TracerProvider
	// Propagator writes and reads trace context in headers; nil means W3C
	// TraceContext and Baggage (independent of the global propagator, so trace
	// context flows even when tracing is not exported).
	Propagator propagation.TextMapPropagator
	// DrainTimeout bounds Close; zero means 30s.
	DrainTimeout time.Duration
}

// TLSConfig names PEM files. CA alone verifies the server; Cert and Key
// together add a client certificate.
type TLSConfig struct {
	CA   string
	Cert string
	Key  string
	// ServerName is the name the server's certificate must be valid for, when it is not the
	// URL's host (a port-forward to 127.0.0.1).
	ServerName string
}

// Conn is a connection to NATS with JetStream. It is safe for concurrent use.
type Conn struct {
	nc         *nats.Conn
	js         jetstream.JetStream
	prefix     subject.Prefix
	log        zerolog.Logger
	metrics    *metrics
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	closed     chan struct{} // closed by nats.go's ClosedHandler, once (closeOnce)
	closeOnce  sync.Once
	health     consumerHealth
	replicas   int
	// lastConnectErr is why the last attempt to connect failed, for Connect's error.
	lastConnectErr atomic.Pointer[error]
}

// Connect dials NATS and waits until the first connection is up or ctx ends.
// The connection reconnects forever with jitter; disconnects and reconnects
// are logged.
func Connect(ctx context.Context, cfg Config) (*Conn, error) {
	prefix, err := subject.ParsePrefix(cfg.Prefix)
	if err != nil {
		return nil, fmt.Errorf("connecting to nats: %w", err)
	}
	if cfg.URL == "" {
		return nil, fmt.Errorf("connecting to nats: empty URL")
	}
	servers, fromURL, err := parseServers(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("connecting to nats: %w", err)
	}
	login, err := credentials(cfg, fromURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to nats at %s: %w", servers, err)
	}
	if cfg.StreamReplicas < 0 || cfg.StreamReplicas > 5 {
		return nil, fmt.Errorf("connecting to nats: stream replicas %d: must be 1 to 5", cfg.StreamReplicas)
	}
	c := &Conn{
		prefix:     prefix,
		log:        zerolog.Nop(),
		propagator: cfg.Propagator,
		closed:     make(chan struct{}),
		replicas:   max(cfg.StreamReplicas, 1),
	}
	if cfg.Logger != nil {
		c.log = cfg.Logger.With().Str("component", "bus").Logger()
	}
	if c.propagator == nil {
		c.propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	c.tracer = tp.Tracer(instrumentationName)
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	if c.metrics, err = newMetrics(reg); err != nil {
		return nil, fmt.Errorf("registering bus metrics: %w", err)
	}

	// Closed once, on the first connection, by whichever sees it first: nats.go's handler
	// goroutine or this one.
	connected := make(chan struct{})
	var connectedOnce sync.Once
	markConnected := func() { connectedOnce.Do(func() { close(connected) }) }
	opts := append(c.options(cfg, markConnected), login...)
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	nc, err := nats.Connect(servers, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to nats at %s: %w", servers, err)
	}
	if nc.IsConnected() {
		markConnected()
	}
	select {
	case <-connected:
	case <-ctx.Done():
		nc.Close()
		if last := c.lastConnectErr.Load(); last != nil {
			// e.g. "nats: authorization violation": why it did not connect, beside the wait.
			return nil, fmt.Errorf("connecting to nats at %s: %w (last error: %v)", servers, ctx.Err(), *last)
		}
		return nil, fmt.Errorf("connecting to nats at %s: %w", servers, ctx.Err())
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("opening jetstream: %w", err)
	}
	c.nc, c.js = nc, js
	return c, nil
}

// options builds the nats.go options for cfg. markConnected is called on every successful
// connection; it must be safe to call more than once and from any goroutine.
func (c *Conn) options(cfg Config, markConnected func()) []nats.Option {
	drain := cfg.DrainTimeout
	if drain <= 0 {
		drain = 30 * time.Second
	}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(time.Second),
		nats.ReconnectJitter(500*time.Millisecond, 2*time.Second),
		nats.DrainTimeout(drain),
		nats.ConnectHandler(func(*nats.Conn) { markConnected() }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			c.log.Warn().Err(err).Msg("disconnected from nats")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			markConnected()
			c.log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("reconnected to nats")
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { c.lastConnectErr.Store(&err) }),
		nats.ClosedHandler(func(*nats.Conn) { c.closeOnce.Do(func() { close(c.closed) }) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			ev := c.log.Error().Err(err)
			if sub != nil {
				ev = ev.Str("subject", sub.Subject)
			}
			ev.Msg("nats async error")
		}),
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLS.CA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLS.CA))
	}
	if cfg.TLS.Cert != "" || cfg.TLS.Key != "" {
		opts = append(opts, nats.ClientCert(cfg.TLS.Cert, cfg.TLS.Key))
	}
	if name := cfg.TLS.ServerName; name != "" {
		opts = append(opts, func(o *nats.Options) error {
			if o.TLSConfig == nil {
				o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			}
			o.TLSConfig.ServerName, o.Secure = name, true
			return nil
		})
	}
	return opts
}

// Close drains the connection: subscriptions stop receiving, in-flight
// callbacks finish, pending publishes are flushed, then the connection
// closes. It waits for that, up to the drain timeout.
func (c *Conn) Close() error {
	if c.nc.IsClosed() {
		return nil
	}
	if err := c.nc.Drain(); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) {
			return nil
		}
		c.nc.Close()
		return fmt.Errorf("draining nats connection: %w", err)
	}
	<-c.closed
	return nil
}

// Ready reports whether the connection is currently up and every running
// Consume has its consumer: one whose consumer vanished and cannot be created
// again makes the connection not ready, naming it. It fits an admin server's
// readiness checks.
func (c *Conn) Ready(context.Context) error {
	if st := c.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("nats connection is %s", st)
	}
	return c.health.err()
}

// consumerHealth holds, per running Consume, why its consumer cannot be ensured (nil when it
// is fine).
type consumerHealth struct {
	mu   sync.Mutex
	next uint64
	errs map[uint64]error
}

func (h *consumerHealth) add() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.errs == nil {
		h.errs = map[uint64]error{}
	}
	h.next++
	h.errs[h.next] = nil
	return h.next
}

func (h *consumerHealth) set(key uint64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.errs[key]; ok {
		h.errs[key] = err
	}
}

func (h *consumerHealth) remove(key uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.errs, key)
}

func (h *consumerHealth) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var msgs []string
	for _, err := range h.errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	sort.Strings(msgs)
	return errors.New(strings.Join(msgs, "; "))
}

// Prefix is the subject prefix this connection uses.
func (c *Conn) Prefix() subject.Prefix { return c.prefix }

// NATS exposes the underlying core connection (for plain subscriptions).
func (c *Conn) NATS() *nats.Conn { return c.nc }

// JetStream exposes the JetStream API (for key-value access and the like).
func (c *Conn) JetStream() jetstream.JetStream { return c.js }
