// Package bustest runs a real nats-server with JetStream inside the test
// process, so that tests exercise the same broker the services use in
// production: random port, store in t.TempDir(), shut down by t.Cleanup.
//
//	srv := bustest.RunServer(t)
//	conn, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL()})
package bustest

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RunServer starts an in-process nats-server with JetStream enabled on a
// random local port and a temporary store directory. The server is shut down
// when the test ends. Use srv.ClientURL() to connect.
func RunServer(t testing.TB) *server.Server {
	t.Helper()
	return start(t, -1, t.TempDir(), nil)
}

// RunServerWithPassword is RunServer for a server that admits only the user with the password.
func RunServerWithPassword(t testing.TB, user, password string) *server.Server {
	t.Helper()
	return start(t, -1, t.TempDir(), func(o *server.Options) { o.Username, o.Password = user, password })
}

// Connect opens a plain client connection to url (no bus.Conn: for a test that looks at the
// broker as an operator would, or writes what a service must cope with) and its JetStream. The
// connection is closed when the test ends.
func Connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// edits remembers the options edit each server was started with, so Restart starts it again
// alike (a cluster node comes back into its cluster, under its name).
var edits sync.Map // *server.Server -> func(*server.Options)

// Restart shuts srv down and starts a new server on the same port with the
// same JetStream store and options, as a broker restart would. Clients
// reconnect to it; a node of RunCluster rejoins its cluster.
func Restart(t testing.TB, srv *server.Server) *server.Server {
	t.Helper()
	port := srv.Addr().(*net.TCPAddr).Port
	store := srv.JetStreamConfig().StoreDir
	if filepath.Base(store) == server.JetStreamStoreDir {
		store = filepath.Dir(store) // the server appends it again
	}
	var edit func(*server.Options)
	if e, ok := edits.Load(srv); ok {
		edit = e.(func(*server.Options))
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	return start(t, port, store, edit)
}

// RunServerWith is RunServer with the options changed by edit first (e.g. a small
// MaxPayload).
func RunServerWith(t testing.TB, edit func(*server.Options)) *server.Server {
	t.Helper()
	return start(t, -1, t.TempDir(), edit)
}

// RunCluster starts n in-process servers forming one JetStream cluster (streams can have up
// to n replicas) and waits until JetStream is ready on all of them. Connect to any of their
// ClientURLs; all are shut down when the test ends.
func RunCluster(t testing.TB, n int) []*server.Server {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	srvs := make([]*server.Server, n)
	for i := range srvs {
		srvs[i] = start(t, -1, t.TempDir(), func(o *server.Options) {
			o.ServerName = fmt.Sprintf("bustest-%d", i)
			o.Cluster = server.ClusterOpts{Name: "bustest", Host: "127.0.0.1", Port: ports[i]}
			o.Routes = routes
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for !clusterReady(srvs) {
		if time.Now().After(deadline) {
			t.Fatalf("nats cluster: JetStream not ready after 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return srvs
}

// clusterReady reports whether the cluster has a JetStream meta leader that every server follows.
func clusterReady(srvs []*server.Server) bool {
	leader := false
	for _, s := range srvs {
		if !s.JetStreamIsCurrent() {
			return false
		}
		leader = leader || s.JetStreamIsLeader()
	}
	return leader
}

func start(t testing.TB, port int, store string, edit func(*server.Options)) *server.Server {
	t.Helper()
	opts := &server.Options{
		ServerName: "bustest",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   store,
		NoLog:      true,
		NoSigs:     true,
	}
	if edit != nil {
		edit(opts)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("creating nats-server: %v", err)
	}
	if edit != nil {
		edits.Store(srv, edit)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatalf("nats-server not ready for connections after 10s")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
		edits.Delete(srv)
	})
	return srv
}

// Buffer is a log sink the connection's goroutines (its reconnect and error callbacks, a
// running consumer) may write to while the test reads it. The zero value is ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
