// Package clustertest gives a test binary one shared local control plane (see localcluster):
// started on first use, stopped when the binary's tests end.
//
//	func TestMain(m *testing.M) { clustertest.Main(m) }
//	func TestX(t *testing.T) { c := clustertest.Get(t); client, _ := c.Client(); ... }
//
// Tests on the shared cluster must not depend on being alone in it: use their own namespace
// and unique node names.
package clustertest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fleetwright/fleetwright/tools/localcluster"
)

var (
	mu      sync.Mutex
	shared  *localcluster.Cluster
	dir     string
	failure error
)

// Main runs the package's tests and stops the shared cluster afterwards.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "clustertest: stopping cluster: %v\n", err)
		}
	}
	if dir != "" && code == 0 {
		_ = os.RemoveAll(dir)
	} else if dir != "" {
		fmt.Fprintf(os.Stderr, "clustertest: keeping %s for its logs\n", dir)
	}
	mu.Unlock()
	os.Exit(code)
}

// Get returns the shared cluster, starting it (and building binaries if missing) on first use.
// A start failure fails every test that asks for the cluster.
func Get(t testing.TB) *localcluster.Cluster {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if failure != nil {
		t.Fatalf("local cluster unavailable: %v", failure)
	}
	if shared != nil {
		if err := shared.Healthy(); err != nil {
			t.Fatalf("local cluster died: %v", err)
		}
		return shared
	}
	d, err := os.MkdirTemp("", "fleetwright-cluster-")
	if err != nil {
		failure = err
		t.Fatalf("creating cluster dir: %v", err)
	}
	dir = d
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: d, Out: os.Stderr})
	if err != nil {
		failure = err
		t.Fatalf("starting local cluster: %v", err)
	}
	shared = c
	return c
}
