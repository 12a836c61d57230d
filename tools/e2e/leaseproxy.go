package e2e

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// LeaseDelayProxy is a reverse proxy in front of the kube-apiserver for one service replica
// (StartReplica's KubeServer): it forwards everything with the cluster's credentials, the
// replica's impersonation headers kept, and holds back the replica's writes to Leases by
// Delay while a delay is set. A leader whose renewals are held past its renew deadline loses
// its Lease to a standby, and its held renewal then arrives late, as over a congested network.
type LeaseDelayProxy struct {
	// URL is the proxy's address (plain HTTP on loopback).
	URL string

	delay   atomic.Int64 // nanoseconds
	delayed atomic.Int64
	mu      sync.Mutex
	writes  []LeaseWrite
}

// LeaseWrite is one Lease write that went through the proxy.
type LeaseWrite struct {
	Method, Path string
	Delayed      time.Duration
	Status       int
	At           time.Time // when it was answered
}

// NewLeaseDelayProxy starts a proxy to s's kube-apiserver, stopped when the test ends.
func NewLeaseDelayProxy(t testing.TB, s *Stack) *LeaseDelayProxy {
	t.Helper()
	rc, err := s.Cluster.RESTConfig()
	require.NoError(t, err)
	target, err := url.Parse(rc.Host)
	require.NoError(t, err)
	transport, err := rest.TransportFor(rc)
	require.NoError(t, err)
	p := &LeaseDelayProxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.URL = "http://" + l.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !leaseWrite(r) {
			rp.ServeHTTP(w, r)
			return
		}
		var held time.Duration
		if d := time.Duration(p.delay.Load()); d > 0 {
			p.delayed.Add(1)
			held = d
			time.Sleep(d)
		}
		// A held write still reaches the apiserver when its client gave up waiting, as a
		// request delayed on the network does: a renewal that lands after the Lease changed
		// hands must be refused there.
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		rp.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
		p.mu.Lock()
		p.writes = append(p.writes, LeaseWrite{Method: r.Method, Path: r.URL.Path, Delayed: held, Status: rec.status, At: time.Now()})
		p.mu.Unlock()
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// leaseWrite reports whether r creates, updates or patches a Lease.
func leaseWrite(r *http.Request) bool {
	return r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/apis/coordination.k8s.io/") &&
		strings.Contains(r.URL.Path, "/leases")
}

// Delay holds every Lease write from now on by d before forwarding it; 0 stops delaying
// (writes already held still wait out their delay).
func (p *LeaseDelayProxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

// Delayed is how many Lease writes were held back so far.
func (p *LeaseDelayProxy) Delayed() int { return int(p.delayed.Load()) }

// Writes are the Lease writes forwarded so far, in the order they were answered.
func (p *LeaseDelayProxy) Writes() []LeaseWrite {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]LeaseWrite(nil), p.writes...)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
