package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadinessCheck reports why a service is not ready to take work, or nil.
type ReadinessCheck func(ctx context.Context) error

// AdminServer is a service's one admin HTTP port:
//
//	/metrics  Prometheus metrics from the given gatherer
//	/healthz  200 while the process serves HTTP (liveness)
//	/readyz   200 when every readiness check passes, else 503 naming the
//	          failing check and its error
//	/debug/pprof/  Go's profiles (net/http/pprof), only once EnableProfiling is called
type AdminServer struct {
	addr      string
	gatherer  prometheus.Gatherer
	timeout   time.Duration
	profiling bool

	mu       sync.Mutex
	checks   []namedCheck
	srv      *http.Server
	ln       net.Listener
	serveErr error // why serving stopped early, reported by Shutdown
}

type namedCheck struct {
	name  string
	check ReadinessCheck
}

// NewAdminServer prepares an admin server on addr (":0" picks a free port).
// A nil gatherer means prometheus.DefaultGatherer.
func NewAdminServer(addr string, gatherer prometheus.Gatherer) *AdminServer {
	if gatherer == nil {
		gatherer = prometheus.DefaultGatherer
	}
	return &AdminServer{addr: addr, gatherer: gatherer, timeout: 5 * time.Second}
}

// EnableProfiling serves Go's runtime profiles under /debug/pprof/ (`go tool pprof
// http://<admin>/debug/pprof/heap`). Off unless asked for: a CPU profile costs the process
// while it runs, and the profiles show its internals. Call it before Start.
func (a *AdminServer) EnableProfiling() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.profiling = true
}

// AddReadiness registers a named readiness check, e.g. "nats" or
// "informers". Checks run in registration order on each /readyz request.
func (a *AdminServer) AddReadiness(name string, check ReadinessCheck) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checks = append(a.checks, namedCheck{name: name, check: check})
}

// Handler returns the admin routes, for tests or embedding.
func (a *AdminServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", a.serveReady)
	a.mu.Lock()
	profiling := a.profiling
	a.mu.Unlock()
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index) // the named profiles: heap, goroutine, allocs, block, mutex, ...
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func (a *AdminServer) serveReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), a.timeout)
	defer cancel()
	a.mu.Lock()
	checks := append([]namedCheck(nil), a.checks...)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	for _, c := range checks {
		if err := c.check(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "not ready: %s: %v\n", c.name, err)
			return
		}
	}
	_, _ = fmt.Fprintln(w, "ok")
}

// Start listens on the address and serves in the background. Addr tells the
// bound address afterwards.
func (a *AdminServer) Start() error {
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		return fmt.Errorf("starting admin server on %s: %w", a.addr, err)
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	a.mu.Lock()
	a.srv, a.ln = srv, ln
	a.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.mu.Lock()
			a.serveErr = err
			a.mu.Unlock()
		}
	}()
	return nil
}

// Addr is the address the server listens on, once started.
func (a *AdminServer) Addr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ln == nil {
		return a.addr
	}
	return a.ln.Addr().String()
}

// Shutdown stops the server, letting in-flight requests finish until ctx
// ends. It also reports an error that stopped serving early.
func (a *AdminServer) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	srv := a.srv
	a.mu.Unlock()
	if srv == nil {
		return nil
	}
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutting down admin server: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.serveErr != nil {
		return fmt.Errorf("serving admin endpoints: %w", a.serveErr)
	}
	return nil
}
