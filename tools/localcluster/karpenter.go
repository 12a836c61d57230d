package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// KarpenterVersion is the release of Karpenter whose kwok cloud provider tools/scale --peer
// karpenter runs on the local control plane; modules/karpenter pins the same release.
const KarpenterVersion = "v1.14.1"

const karpenterBinary = "karpenter-kwok"

// KarpenterBinDir holds the kwok provider of the pinned release, beside the control plane's
// binaries in CacheDir.
func KarpenterBinDir() string {
	return filepath.Join(CacheDir(), "karpenter", KarpenterVersion, "bin")
}

// EnsureKarpenterKwok builds Karpenter's kwok provider into KarpenterBinDir unless it is there,
// printing progress to out, and returns the binary's path. A cold build takes a few minutes.
func EnsureKarpenterKwok(ctx context.Context, out io.Writer) (string, error) {
	return ensureOne(ctx, KarpenterBinDir(), binary{karpenterBinary, "karpenter", "sigs.k8s.io/karpenter/kwok"}, out)
}

// KarpenterSource is the module cache directory of the pinned Karpenter release (its CRDs:
// kwok/charts/crds, kwok/apis/crds), downloaded through the module proxy if needed.
func KarpenterSource(ctx context.Context) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, goTool(), "mod", "download", "-json", "sigs.k8s.io/karpenter@"+KarpenterVersion)
	cmd.Dir = filepath.Join(root, "karpenter")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GONOSUMDB="+nosumdb)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download sigs.k8s.io/karpenter@%s: %w", KarpenterVersion, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("reading go mod download's answer: %w", err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download sigs.k8s.io/karpenter@%s: %s", KarpenterVersion, m.Error)
	}
	return m.Dir, nil
}
