package deploytest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// natsPod renders an overlay and gives the nats container's command line with $(VAR) expanded
// the way the kubelet does, its environment, and the nats-config ConfigMap written to a
// directory that stands for /etc/nats (and tlsDir, if not empty, for /etc/nats-tls).
func natsPod(t *testing.T, overlay, tlsDir string) (args []string, env map[string]string) {
	t.Helper()
	m := render(t, filepath.Join(root(t), "deploy", "overlays", overlay))
	ss := find(t, m, "StatefulSet", "nats")
	c := "[name=nats]"
	var raw []string
	require.NoError(t, yaml.Unmarshal([]byte(field(t, ss, "spec", "template", "spec", "containers", c, "args")), &raw))
	var vars []struct {
		Name      string
		Value     string
		ValueFrom *struct {
			SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(field(t, ss, "spec", "template", "spec", "containers", c, "env")), &vars))
	env = map[string]string{}
	expand := regexp.MustCompile(`\$\(([A-Z_]+)\)`)
	expanded := func(s string) string { // $(VAR) of the variables defined so far, as the kubelet does
		return expand.ReplaceAllStringFunc(s, func(ref string) string {
			v, ok := env[ref[2:len(ref)-1]]
			require.True(t, ok, "%s refers to %s, which the container does not define before it", s, ref)
			return v
		})
	}
	for _, v := range vars {
		switch {
		case v.Name == "SERVER_NAME":
			env[v.Name] = "nats-0"
		case v.ValueFrom != nil:
			env[v.Name] = "pw-" + strings.ToLower(v.Name) // URL-safe, as the Secret must be
		default:
			env[v.Name] = expanded(v.Value)
		}
		t.Setenv(v.Name, env[v.Name])
	}
	require.Contains(t, env, "NATS_ROUTE_PASSWORD")

	dir := t.TempDir()
	var cm *yaml.RNode
	for _, r := range m.Resources() {
		if r.GetKind() == "ConfigMap" && strings.HasPrefix(r.GetName(), "nats-config") {
			n, err := yaml.Parse(r.MustYaml())
			require.NoError(t, err)
			cm = n
		}
	}
	require.NotNil(t, cm)
	data := map[string]string{}
	require.NoError(t, yaml.Unmarshal([]byte(field(t, cm, "data")), &data))
	for name, text := range data {
		if tlsDir != "" {
			text = strings.ReplaceAll(text, "/etc/nats-tls/", tlsDir+"/")
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	for _, a := range raw {
		args = append(args, strings.Replace(expanded(a), "/etc/nats/", dir+"/", 1))
	}
	return args, env
}

// configure parses a command line the way nats-server's main does.
func configure(t *testing.T, args []string) *server.Options {
	t.Helper()
	fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
	opts, err := server.ConfigureOptions(fs, args, func() {}, func() {}, func() {})
	require.NoError(t, err, "nats-server refuses the pod's command line %v", args)
	return opts
}

// TestNATSRoutesAuthenticate: the shipped servers require the route user and password from
// the Secret fleetwright-nats-routes on the route port, and solicit their three routes with it.
func TestNATSRoutesAuthenticate(t *testing.T) {
	args, env := natsPod(t, "local", "")
	// Issue 31, item 9: the password is read by the configuration from the environment, never
	// written on nats-server's command line (which /proc/<pid>/cmdline, ps and /varz show).
	for _, a := range args {
		require.NotContains(t, a, env["NATS_ROUTE_PASSWORD"], "the route password is on nats-server's command line")
	}
	opts := configure(t, args)
	require.Equal(t, "route", opts.Cluster.Username)
	require.Equal(t, env["NATS_ROUTE_PASSWORD"], opts.Cluster.Password)
	require.Len(t, opts.Routes, 3, "one route per StatefulSet replica")
	for i, r := range opts.Routes {
		require.Equal(t, fmt.Sprintf("nats-%d.nats-headless:6222", i), r.Host)
		pw, _ := r.User.Password()
		require.Equal(t, "route", r.User.Username(), r.Redacted())
		require.Equal(t, env["NATS_ROUTE_PASSWORD"], pw, r.Redacted())
	}
	require.Nil(t, opts.Cluster.TLSConfig, "route TLS comes with the nats-tls component only")

	// Two real servers with that cluster configuration: one that knows the password joins; a
	// route connection without it is refused.
	start := func(name string, routes []*url.URL) *server.Server {
		o := opts.Clone()
		o.ServerName, o.Host, o.Port, o.HTTPPort = name, "127.0.0.1", -1, 0
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", -1
		o.Routes, o.JetStream, o.PidFile = routes, false, ""
		o.NoLog, o.NoSigs = true, true
		s, err := server.NewServer(o)
		require.NoError(t, err)
		go s.Start()
		require.True(t, s.ReadyForConnections(10*time.Second))
		t.Cleanup(s.Shutdown)
		return s
	}
	a := start("a", nil)
	routeAddr := a.ClusterAddr().String()

	// Without credentials: the server answers CONNECT with an authorization error.
	conn, err := net.DialTimeout("tcp", routeAddr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	rd := bufio.NewReader(conn)
	info, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, info, `"auth_required":true`)
	_, err = fmt.Fprintf(conn, "CONNECT {\"verbose\":false,\"pedantic\":false,\"user\":\"route\",\"pass\":\"wrong\",\"name\":\"intruder\"}\r\nPING\r\n")
	require.NoError(t, err)
	reply, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, reply, "Authorization Violation")

	// With them (the URL form the StatefulSet's --routes uses): the route comes up.
	u := &url.URL{Scheme: "nats", Host: routeAddr, User: url.UserPassword("route", env["NATS_ROUTE_PASSWORD"])}
	b := start("b", []*url.URL{u})
	require.Eventually(t, func() bool { return a.NumRoutes() > 0 && b.NumRoutes() > 0 }, 15*time.Second, 20*time.Millisecond,
		"a server with the route password did not join")
}

// TestNATSRoutesUseTLSWithTheComponent: with deploy/components/nats-tls (the eks overlay) the
// routes use mutual TLS with the nats-tls certificate, and a plain-text route is refused.
func TestNATSRoutesUseTLSWithTheComponent(t *testing.T) {
	tlsDir := t.TempDir()
	writeTestCerts(t, tlsDir)
	args, env := natsPod(t, "eks", tlsDir)
	opts := configure(t, args)
	require.Equal(t, "route", opts.Cluster.Username)
	require.NotNil(t, opts.Cluster.TLSConfig, "routes are encrypted")
	require.Equal(t, tls.RequireAndVerifyClientCert, opts.Cluster.TLSConfig.ClientAuth, "routes verify their peer")
	require.NotNil(t, opts.TLSConfig, "client TLS stays on")

	start := func(name string, routes []*url.URL) *server.Server {
		o := opts.Clone()
		o.ServerName, o.Host, o.Port, o.HTTPPort = name, "127.0.0.1", -1, 0
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", -1
		o.Routes, o.JetStream, o.PidFile = routes, false, ""
		o.NoLog, o.NoSigs = true, true
		s, err := server.NewServer(o)
		require.NoError(t, err)
		go s.Start()
		require.True(t, s.ReadyForConnections(10*time.Second))
		t.Cleanup(s.Shutdown)
		return s
	}
	a := start("a", nil)

	// Plain text, even with the password: no route.
	conn, err := net.DialTimeout("tcp", a.ClusterAddr().String(), 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, _ = fmt.Fprintf(conn, "CONNECT {\"verbose\":false,\"user\":\"route\",\"pass\":%q}\r\nPING\r\n", env["NATS_ROUTE_PASSWORD"])
	got, _ := io.ReadAll(conn) // until the server closes it (or the deadline)
	require.NotContains(t, string(got), "PONG", "a plain-text route was accepted")

	// TLS with the certificate and the password: the route comes up.
	port := a.ClusterAddr().Port
	u := &url.URL{Scheme: "nats", Host: fmt.Sprintf("localhost:%d", port), User: url.UserPassword("route", env["NATS_ROUTE_PASSWORD"])}
	b := start("b", []*url.URL{u})
	require.Eventually(t, func() bool { return a.NumRoutes() > 0 && b.NumRoutes() > 0 }, 15*time.Second, 20*time.Millisecond,
		"a server with the certificate and the route password did not join")
}

// writeTestCerts writes ca.crt, tls.crt and tls.key (a CA and a server/client certificate
// for localhost) to dir, as the Secret nats-tls holds them.
func writeTestCerts(t *testing.T, dir string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "nats"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	for name, block := range map[string]*pem.Block{
		"ca.crt":  {Type: "CERTIFICATE", Bytes: caDER},
		"tls.crt": {Type: "CERTIFICATE", Bytes: leafDER},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600))
	}
}
