package deploytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// copyDeploy copies deploy/ into a temporary directory, so a test can edit an overlay's files
// and render the result; it returns the copy's deploy/.
func copyDeploy(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "deploy")
	src := filepath.Join(root(t), "deploy")
	require.NoError(t, filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
	return dst
}

// eksWithCertManager is a copy of the eks overlay with the nats-tls-cert-manager component
// beside nats-tls, as install-eks.md has users add it; it returns the overlay's directory.
func eksWithCertManager(t *testing.T) string {
	t.Helper()
	deploy := copyDeploy(t)
	kust := filepath.Join(deploy, "overlays", "eks", "kustomization.yaml")
	b, err := os.ReadFile(kust)
	require.NoError(t, err)
	with := strings.Replace(string(b), "  - ../../components/nats-tls\n", "  - ../../components/nats-tls\n  - ../../components/nats-tls-cert-manager\n", 1)
	require.NotEqual(t, string(b), with, "the eks overlay lists the nats-tls component")
	require.NoError(t, os.WriteFile(kust, []byte(with), 0o644))
	return filepath.Join(deploy, "overlays", "eks")
}

// setEnv rewrites KEY=VALUE lines of an env file.
func setEnv(t *testing.T, path string, values map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if k, _, ok := strings.Cut(l, "="); ok {
			if v, set := values[k]; set {
				lines[i] = k + "=" + v
				delete(values, k)
			}
		}
	}
	require.Empty(t, values, "settings.env has no such lines")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644))
}

// containerEnv is what a Deployment's container sees in its environment: the ConfigMaps of its
// envFrom, then its env (literal values only), as the kubelet builds it.
func containerEnv(t *testing.T, m resmap.ResMap, d *yaml.RNode) map[string]string {
	env, _ := container(t, m, d)
	return env
}

// container is a Deployment's first container's environment (containerEnv) and arguments.
func container(t *testing.T, m resmap.ResMap, d *yaml.RNode) (map[string]string, []string) {
	t.Helper()
	var spec struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Args    []string
						EnvFrom []struct {
							ConfigMapRef *struct{ Name string } `yaml:"configMapRef"`
						} `yaml:"envFrom"`
						Env []struct{ Name, Value string }
					}
				}
			}
		}
	}
	require.NoError(t, yaml.Unmarshal([]byte(d.MustString()), &spec))
	c := spec.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			continue
		}
		var cm struct{ Data map[string]string }
		require.NoError(t, yaml.Unmarshal([]byte(find(t, m, "ConfigMap", from.ConfigMapRef.Name).MustString()), &cm))
		for k, v := range cm.Data {
			env[k] = v
		}
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env, c.Args
}

// expand is the kubelet's $(VAR) expansion of a container's args.
func expand(args []string, env map[string]string) []string {
	re := regexp.MustCompile(`\$\(([A-Z_][A-Z0-9_]*)\)`)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = re.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	return out
}

// TestEKSOverlayQueueAndServiceCIDR renders the eks overlay with an interruption queue and a
// service CIDR that are not the defaults, as a user sets them in settings.env, and finds each
// where it belongs: the queue in the terminator's environment and arguments, as the
// CloudFormation stack given the same QueueName names it; the CIDR in the launcher's
// environment; neither anywhere a default would win.
func TestEKSOverlayQueueAndServiceCIDR(t *testing.T) {
	const queue, cidr = "prod-1-interruptions", "172.20.0.0/16"
	deploy := copyDeploy(t)
	setEnv(t, filepath.Join(deploy, "overlays", "eks", "settings.env"), map[string]string{
		"CLUSTER_NAME": "prod-1", "INTERRUPTION_QUEUE": queue, "CLUSTER_CIDR": cidr})
	m := render(t, filepath.Join(deploy, "overlays", "eks"))

	env, args := container(t, m, find(t, m, "Deployment", "terminator"))
	assert.Equal(t, queue, env["INTERRUPTION_QUEUE"], "the terminator reads the queue")
	args = expand(args, env)
	assert.Contains(t, args, "--interruption-queue="+queue, "the terminator's --interruption-queue, once the kubelet expands it")
	assert.Contains(t, args, "--cluster-name=prod-1")

	launcher := containerEnv(t, m, find(t, m, "Deployment", "launcher"))
	assert.Equal(t, cidr, launcher["CLUSTER_CIDR"], "the launcher reads the service CIDR")
	for _, svc := range []string{"pod-watcher", "scheduler"} {
		assert.Equal(t, cidr, containerEnv(t, m, find(t, m, "Deployment", svc))["CLUSTER_CIDR"], "%s shares the settings", svc)
	}

	stack := resolveStack(t, map[string]string{"ClusterName": "prod-1", "NodeRoleName": "KarpenterNodeRole-prod-1", "QueueName": queue})
	assert.Equal(t, queue, stack.outputs["InterruptionQueueName"], "the stack's queue is the one the terminator polls")

	// Unset, the service CIDR is empty in the settings (the launcher then asks EKS), never a guess.
	defaults := render(t, filepath.Join(root(t), "deploy", "overlays", "eks"))
	assert.Empty(t, containerEnv(t, defaults, find(t, defaults, "Deployment", "launcher"))["CLUSTER_CIDR"])
	assert.Equal(t, "fleetwright-my-cluster", containerEnv(t, defaults, find(t, defaults, "Deployment", "terminator"))["INTERRUPTION_QUEUE"],
		"the default queue is the stack's default, not Karpenter's <cluster>")
}

// TestNATSCertificateCoversEveryName: the certificate deploy/components/nats-tls-cert-manager
// has cert-manager issue is valid, as Go's TLS (nats-server's and the clients') checks names,
// for every name deploy/ reaches NATS by: the clients' NATS_HOST and each route of the
// StatefulSet; and it may serve and authenticate clients (routes are mutual TLS).
func TestNATSCertificateCoversEveryName(t *testing.T) {
	m := render(t, eksWithCertManager(t))

	var cert struct {
		Metadata struct{ Namespace string }
		Spec     struct {
			SecretName string   `yaml:"secretName"`
			DNSNames   []string `yaml:"dnsNames"`
			Usages     []string
		}
	}
	require.NoError(t, yaml.Unmarshal([]byte(find(t, m, "Certificate", "nats-tls").MustString()), &cert))
	assert.Equal(t, "nats-tls", cert.Spec.SecretName, "the Secret the nats-tls component mounts")
	assert.Equal(t, "fleetwright", cert.Metadata.Namespace)
	assert.Subset(t, cert.Spec.Usages, []string{"server auth", "client auth"})

	// A certificate with exactly those names, checked the way crypto/tls checks a peer's.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: cert.Spec.DNSNames,
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}, &x509.Certificate{SerialNumber: big.NewInt(1)}, &key.PublicKey, key)
	require.NoError(t, err)
	issued, err := x509.ParseCertificate(der)
	require.NoError(t, err)

	settings := containerEnv(t, m, find(t, m, "Deployment", "scheduler"))
	host, _, _ := strings.Cut(settings["NATS_HOST"], ":")
	names := []string{host}
	// The routes are in the container's environment (NATS_ROUTES, read by nats.conf), so the route
	// password is never expanded into nats-server's command line.
	routes := field(t, find(t, m, "StatefulSet", "nats"), "spec", "template", "spec", "containers", "[name=nats]", "env")
	for _, r := range regexp.MustCompile(`@([a-z0-9.-]+):6222`).FindAllStringSubmatch(routes, -1) {
		names = append(names, r[1])
	}
	require.Len(t, names, 4, "the client host and three routes: %s", routes)
	for _, n := range names {
		assert.NoError(t, issued.VerifyHostname(n), "the certificate is not valid for %s", n)
	}
}
