package e2e

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	ec2v1alpha1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1alpha1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
)

// NewClient is a controller-runtime client that knows Kubernetes' types and both generations
// of Karpenter's, for tests and for the tools that drive a stack (tools/soak, tools/scale).
func NewClient(rc *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, ec2v1.AddToScheme, v1alpha5.AddToScheme, ec2v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	// Its client logs through controller-runtime's logger; say nothing rather than warn that none is set.
	crlog.SetLogger(logr.Discard())
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return c, nil
}

// ReadStackEnv reads the env file `make up` writes (.local/env): its `export K=V` lines.
func ReadStackEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the stack's env file: %w", err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "export ")
		if k, v, found := strings.Cut(line, "="); ok && found {
			env[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return env, nil
}
