// Package e2e gives end-to-end tests the real parts: the shared local control plane with
// Fleetwright's CRDs installed, kubectl against it, and Fleetwright's services built and run
// as separate processes, each logging to a file that a failing test prints.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fleetwright/fleetwright/tools/localcluster"
	"github.com/fleetwright/fleetwright/tools/localcluster/clustertest"
	"github.com/fleetwright/fleetwright/tools/proc"
)

// Root is the repository root (the directory holding go.work).
func Root(t testing.TB) string {
	t.Helper()
	root, err := proc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var crdsOnce sync.Once
var crdsErr error

// Cluster returns the shared control plane with deploy/crds applied and established.
func Cluster(t testing.TB) *localcluster.Cluster {
	t.Helper()
	c := clustertest.Get(t)
	crdsOnce.Do(func() {
		dir := filepath.Join(Root(t), "deploy", "crds")
		if _, err := Kubectl(c, "apply", "--server-side", "-k", dir); err != nil {
			crdsErr = err
			return
		}
		_, crdsErr = Kubectl(c, "wait", "--for", "condition=Established", "--timeout", "60s", "crd", "--all")
	})
	if crdsErr != nil {
		t.Fatalf("installing CRDs: %v", crdsErr)
	}
	return c
}

// Kubectl runs the cluster's kubectl and returns its combined output.
func Kubectl(c *localcluster.Cluster, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Kubectl(), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %v: %w\n%s", args, err, out.String())
	}
	return out.String(), nil
}
