package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiProxy stands between one scheduler replica and the kube-apiserver, where real trouble
// strikes: it holds back or fails the requests a rule matches, and records the writes it
// forwards. The replica reaches it through its own kubeconfig (plain HTTP; the proxy adds the
// cluster's credentials).
type apiProxy struct {
	srv        *httptest.Server
	kubeconfig string

	mu     sync.Mutex
	rules  []*rule
	writes []forwarded
}

// forwarded is a write the proxy passed on to the API server.
type forwarded struct {
	at           time.Time
	method, path string
	status       int  // the API server's answer
	late         bool // forwarded after its client had given up (rule.late)
}

// rule acts on the requests it matches while it is on: it fails them (status) or holds them
// until it is turned off. A held request whose client gives up meanwhile is never forwarded.
type rule struct {
	match  func(*http.Request) bool
	status int // answer this instead of forwarding; 0 holds
	// spare lets this many matching requests through untouched before the rule acts.
	spare atomic.Int32
	// lost forwards the request and answers status instead of the API server's answer: the
	// write happened, its answer was lost (an API server restarting mid-request).
	lost bool
	// late forwards a held request when the rule is turned off even if its client gave up
	// meanwhile, as a request delayed on the network reaches the server after its sender
	// stopped waiting.
	late    bool
	on      atomic.Bool
	hits    atomic.Int32 // requests it held or failed
	release chan struct{}
	once    sync.Once
}

// off stops the rule: held requests go on, new ones are not touched.
func (r *rule) off() {
	r.on.Store(false)
	r.once.Do(func() { close(r.release) })
}

// startProxied is start with the replica's API requests going through a new apiProxy, which it
// returns.
func (e *env) startProxied(identity string, extra ...string) *apiProxy {
	proxy := newAPIProxy(e)
	e.start(identity, append([]string{"--kubeconfig", proxy.kubeconfig}, extra...)...)
	return proxy
}

func newAPIProxy(e *env) *apiProxy {
	cfg, err := clientcmd.BuildConfigFromFlags("", e.c.Kubeconfig)
	require.NoError(e.t, err)
	rt, err := rest.TransportFor(cfg)
	require.NoError(e.t, err)
	target, err := url.Parse(cfg.Host)
	require.NoError(e.t, err)
	p := &apiProxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = rt
	rp.FlushInterval = -1 // watches stream
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// Read the body first: only then does the server notice a client that hangs up, which
		// ends the request's context (a held request whose client gave up goes nowhere).
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		p.mu.Lock()
		rules := append([]*rule(nil), p.rules...)
		p.mu.Unlock()
		late := false
		for _, r := range rules {
			if !r.on.Load() || !r.match(req) || r.spare.Add(-1) >= 0 {
				continue
			}
			r.hits.Add(1)
			if r.lost {
				rp.ServeHTTP(httptest.NewRecorder(), req)
			}
			if r.status != 0 {
				http.Error(w, "injected failure", r.status)
				return
			}
			select {
			case <-r.release:
			case <-req.Context().Done():
				if !r.late {
					return // the client gave up: nothing reaches the API server
				}
				<-r.release
				late = true
				req = req.WithContext(context.WithoutCancel(req.Context()))
			}
		}
		if req.Method == http.MethodGet {
			rp.ServeHTTP(w, req) // reads and watches stream
			return
		}
		// A write's answer is recorded, then passed on (unless nobody waits for it).
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, req)
		p.mu.Lock()
		p.writes = append(p.writes, forwarded{at: time.Now(), method: req.Method, path: req.URL.Path, status: rec.Code, late: late})
		p.mu.Unlock()
		if !late {
			for k, vs := range rec.Header() {
				w.Header()[k] = vs
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		}
	}))
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.srv.URL}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "none"}
	kc.AuthInfos["none"] = &clientcmdapi.AuthInfo{}
	kc.CurrentContext = "proxy"
	p.kubeconfig = filepath.Join(e.t.TempDir(), "kubeconfig")
	require.NoError(e.t, clientcmd.WriteToFile(*kc, p.kubeconfig))
	// Registered before any replica that uses it starts, so this runs after they stop.
	e.t.Cleanup(func() {
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	return p
}

// add turns on a rule that fails (status) or holds (0) the requests match accepts.
func (p *apiProxy) add(status int, match func(*http.Request) bool) *rule {
	r := &rule{match: match, status: status, release: make(chan struct{})}
	r.on.Store(true)
	p.mu.Lock()
	p.rules = append(p.rules, r)
	p.mu.Unlock()
	return r
}

// writesSince returns the forwarded writes to paths matching re from t on.
func (p *apiProxy) writesSince(t time.Time, re *regexp.Regexp) []forwarded {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []forwarded
	for _, w := range p.writes {
		if !w.at.Before(t) && re.MatchString(w.path) {
			out = append(out, w)
		}
	}
	return out
}

// claimCreates matches NodeClaim creates (a claim carries its pods' nominations).
func claimCreates(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/apis/karpenter.sh/v1/nodeclaims"
}

// leaseWrites matches the writes of the scheduler's Lease (its renewals).
func leaseWrites(r *http.Request) bool {
	return (r.Method == http.MethodPut || r.Method == http.MethodPatch) &&
		regexp.MustCompile(`^/apis/coordination\.k8s\.io/v1/namespaces/[^/]+/leases/`+leaseName+`$`).MatchString(r.URL.Path)
}
