// Package bustest runs a real nats-server with JetStream inside the test
// process, so that tests exercise the same broker the services use in
// production: random port, store in t.TempDir(), shut down by t.Cleanup.
//
//	srv := bustest.RunServer(t)
//	conn, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL()})
package bustest

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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

// Restart shuts srv down and starts a new server on the same port with the
// same JetStream store, as a broker restart would. Clients reconnect to it.
func Restart(t testing.TB, srv *server.Server) *server.Server {
	t.Helper()
	port := srv.Addr().(*net.TCPAddr).Port
	store := srv.JetStreamConfig().StoreDir
	if filepath.Base(store) == server.JetStreamStoreDir {
		store = filepath.Dir(store) // the server appends it again
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	return start(t, port, store, nil)
}

func start(t testing.TB, port int, store string, auth func(*server.Options)) *server.Server {
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
	if auth != nil {
		auth(opts)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("creating nats-server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatalf("nats-server not ready for connections after 10s")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}
