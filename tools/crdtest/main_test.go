package crdtest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/fleetwright/fleetwright/tools/localcluster"
	"github.com/fleetwright/fleetwright/tools/localcluster/clustertest"
)

func TestMain(m *testing.M) { clustertest.Main(m) }

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

var (
	gvrNodePool        = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	gvrNodeClaim       = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	gvrEC2NodeClass    = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
	gvrProvisioner     = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1alpha5", Resource: "provisioners"}
	gvrAWSNodeTemplate = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1alpha1", Resource: "awsnodetemplates"}
)

// env is the cluster with the CRDs installed, shared by the package's tests.
type env struct {
	cluster *localcluster.Cluster
	dynamic dynamic.Interface
	crds    []string // names of the installed CRDs
}

var (
	setupOnce sync.Once
	shared    *env
	setupErr  error
)

// cluster returns the shared cluster with deploy/crds installed and Established.
func cluster(t *testing.T) *env {
	t.Helper()
	c := clustertest.Get(t)
	setupOnce.Do(func() { shared, setupErr = install(c) })
	require.NoError(t, setupErr, "installing CRDs")
	return shared
}

// install creates every CRD in deploy/crds with the apiextensions client and waits until each
// is Established.
func install(c *localcluster.Cluster) (*env, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	ext, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	crds, err := readCRDs()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := &env{cluster: c, dynamic: dyn}
	for _, crd := range crds {
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			return nil, &installError{crd.Name, err}
		}
		e.crds = append(e.crds, crd.Name)
	}
	for _, name := range e.crds {
		for {
			got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, &installError{name, err}
			}
			if established(got) {
				break
			}
			select {
			case <-ctx.Done():
				return nil, &installError{name, ctx.Err()}
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return e, nil
}

type installError struct {
	crd string
	err error
}

func (e *installError) Error() string { return "installing " + e.crd + ": " + e.err.Error() }
func (e *installError) Unwrap() error { return e.err }

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// readCRDs reads the generated CRD files of deploy/crds.
func readCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "deploy", "crds", "*_*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, &installError{f, err}
		}
		out = append(out, crd)
	}
	return out, nil
}

// kubectl runs the cluster's kubectl with stdin, returning stdout and stderr.
func (e *env) kubectl(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.cluster.Kubectl(), append([]string{"--kubeconfig", e.cluster.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// get reads an object and decodes it, through its JSON, into one of pkg/apis' types.
func (e *env) get(t *testing.T, gvr schema.GroupVersionResource, name string, into any) {
	t.Helper()
	u, err := e.dynamic.Resource(gvr).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	b, err := u.MarshalJSON()
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, into))
}

// create writes one of pkg/apis' objects with strict field validation.
func (e *env) create(t *testing.T, gvr schema.GroupVersionResource, obj runtime.Object, dryRun bool) (*unstructured.Unstructured, error) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err)
	opts := metav1.CreateOptions{FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return e.dynamic.Resource(gvr).Create(context.Background(), &unstructured.Unstructured{Object: m}, opts)
}

// deleteLater removes an object when the test ends.
func (e *env) deleteLater(t *testing.T, gvr schema.GroupVersionResource, name string) {
	t.Cleanup(func() {
		err := e.dynamic.Resource(gvr).Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s %s: %v", gvr.Resource, name, err)
		}
	})
}

func example(path string) string { return filepath.Join(repoRoot, "deploy", "examples", path) }
