package docstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/fleetwright/fleetwright/tools/e2e"
)

// deployed is what deploy/ makes: object names by kind, the Secrets its manifests read, the
// services' admin ports and NATS's ports.
type deployed struct {
	names      map[string]map[string]bool // kind → names
	adminPorts map[string]int             // service → containerPort "admin"
	natsPorts  map[int]bool
}

// kinds are kubectl's names for the kinds the docs name objects of.
var kinds = map[string]string{
	"deploy": "Deployment", "deployment": "Deployment", "deployments": "Deployment",
	"statefulset": "StatefulSet", "sts": "StatefulSet", "svc": "Service", "service": "Service",
	"secret": "Secret", "configmap": "ConfigMap", "cm": "ConfigMap", "lease": "Lease", "job": "Job",
	"pdb": "PodDisruptionBudget", "networkpolicy": "NetworkPolicy", "serviceaccount": "ServiceAccount", "sa": "ServiceAccount",
	"crd": "CustomResourceDefinition", "storageclass": "StorageClass", "certificate": "Certificate", "issuer": "Issuer",
}

// leases are the Leases the services make at run time (not in deploy/), by the file naming them.
var leases = map[string]string{"fleetwright-scheduler": "services/scheduler"}

func loadDeployed(t *testing.T) deployed {
	t.Helper()
	root := e2e.Root(t)
	d := deployed{names: map[string]map[string]bool{}, adminPorts: map[string]int{}, natsPorts: map[int]bool{}}
	add := func(kind, name string) {
		if d.names[kind] == nil {
			d.names[kind] = map[string]bool{}
		}
		d.names[kind][name] = true
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	for _, dir := range []string{"overlays/eks", "overlays/local", "crds"} {
		m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, "deploy", dir))
		require.NoError(t, err, dir)
		for _, r := range m.Resources() {
			add(r.GetKind(), r.GetName())
			text := r.MustYaml()
			for _, s := range regexp.MustCompile(`(?m)(?:secretName|name):\s*(\S+)\n(?:\s+\w+:.*\n)*?\s+key:`).FindAllStringSubmatch(text, -1) {
				add("Secret", s[1])
			}
			for _, s := range regexp.MustCompile(`secretName:\s*(\S+)`).FindAllStringSubmatch(text, -1) {
				add("Secret", s[1])
			}
		}
	}
	for _, f := range []string{"components/nats-tls-cert-manager/certificate.yaml", "prerequisites/gp3-storageclass.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "deploy", f))
		require.NoError(t, err)
		for _, part := range strings.Split(string(b), "\n---") {
			n, err := kyaml.Parse(part)
			require.NoError(t, err, f)
			add(n.GetKind(), n.GetName())
		}
	}
	for name, dir := range leases {
		found := false
		_ = filepath.WalkDir(filepath.Join(root, dir), func(p string, de os.DirEntry, err error) error {
			if err == nil && !de.IsDir() && strings.HasSuffix(p, ".go") {
				if b, _ := os.ReadFile(p); strings.Contains(string(b), `"`+name+`"`) {
					found = true
				}
			}
			return nil
		})
		require.True(t, found, "%s names the Lease %s", dir, name)
		add("Lease", name)
	}
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, "deploy", "overlays", "eks"))
	require.NoError(t, err)
	for _, r := range m.Resources() {
		n, err := kyaml.Parse(r.MustYaml())
		require.NoError(t, err)
		var spec struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Name  string
							Ports []struct {
								Name          string
								ContainerPort int `yaml:"containerPort"`
							}
						}
					}
				}
			}
		}
		require.NoError(t, kyaml.Unmarshal([]byte(n.MustString()), &spec))
		for _, c := range spec.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				switch {
				case r.GetKind() == "Deployment" && p.Name == "admin":
					d.adminPorts[r.GetName()] = p.ContainerPort
				case r.GetKind() == "StatefulSet" && r.GetName() == "nats":
					d.natsPorts[p.ContainerPort] = true
				}
			}
		}
	}
	require.Len(t, d.adminPorts, 4)
	require.NotEmpty(t, d.natsPorts)
	return d
}

var (
	kindSlashName = regexp.MustCompile(`^([a-z]+)/([a-z0-9][a-z0-9.-]*)$`)
	objectName    = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)
	servicePort   = regexp.MustCompile(`\b(pod-watcher|scheduler|launcher|terminator)\b[^\n.;|]{0,24}?\b(80\d\d)\b`)
	colonPort     = regexp.MustCompile(`:(80\d\d)\b`)
	natsPort      = regexp.MustCompile(`(?i)\bNATS\b[^\n.;|,]{0,30}?\b(?:port|ports|on)\b[^\n.;|,]{0,14}?\b(\d{4})\b`)
)

// TestObjectNamesAndPortsMatchDeploy: the objects the docs' kubectl commands name in the
// fleetwright namespace (and the CRDs and StorageClasses they name) are objects deploy/ makes or
// reads; the admin port given for each service is its Deployment's; NATS's ports are its
// StatefulSet's.
func TestObjectNamesAndPortsMatchDeploy(t *testing.T) {
	d := loadDeployed(t)
	check := func(path, kindWord, name, line string) {
		kind, ok := kinds[kindWord]
		if !ok || strings.ContainsAny(name, "<>$*") {
			return
		}
		assert.True(t, d.names[kind][name], "%s: %s %q is not an object deploy/ makes or reads (%s)", path, kind, name, line)
	}
	refs, ports := 0, 0
	for _, doc := range docs(t) {
		for _, code := range doc.Code {
			for _, line := range strings.Split(code, "\n") {
				if !strings.Contains(line, "kubectl") {
					continue
				}
				ns := strings.Contains(line, "-n fleetwright") || strings.Contains(line, "--namespace fleetwright") || strings.Contains(line, "--namespace=fleetwright")
				f := strings.Fields(line)
				for i, tok := range f {
					if m := kindSlashName.FindStringSubmatch(tok); m != nil && (ns || kinds[m[1]] == "CustomResourceDefinition") {
						refs++
						check(doc.Path, m[1], m[2], line)
						continue
					}
					if i+2 < len(f) && ns && (tok == "get" || tok == "describe" || tok == "delete" || tok == "edit" || tok == "annotate" || tok == "patch") &&
						kinds[f[i+1]] != "" && objectName.MatchString(f[i+2]) {
						refs++
						check(doc.Path, f[i+1], f[i+2], line)
					}
					if ns && tok == "generic" && i > 1 && f[i-1] == "secret" && f[i-2] == "create" && i+1 < len(f) {
						refs++
						check(doc.Path, "secret", f[i+1], line)
					}
				}
			}
		}
		for _, m := range servicePort.FindAllStringSubmatch(doc.Text, -1) {
			ports++
			want := d.adminPorts[m[1]]
			got, _ := strconv.Atoi(m[2])
			assert.Equal(t, want, got, "%s: %q gives %s the port %d; its Deployment's admin port is %d", doc.Path, m[0], m[1], got, want)
		}
		for _, m := range colonPort.FindAllStringSubmatch(doc.Text, -1) {
			ports++
			p, _ := strconv.Atoi(m[1])
			found := false
			for _, ap := range d.adminPorts {
				found = found || ap == p
			}
			assert.True(t, found, "%s: port :%d is no service's admin port (deploy/: %v)", doc.Path, p, d.adminPorts)
		}
		for _, m := range natsPort.FindAllStringSubmatch(doc.Prose, -1) {
			p, _ := strconv.Atoi(m[1])
			if p < 1024 || p > 9999 || p == 1000 {
				continue
			}
			ports++
			assert.True(t, d.natsPorts[p], "%s: %q: NATS's StatefulSet has no port %d (%v)", doc.Path, m[0], p, d.natsPorts)
		}
	}
	assert.Greater(t, refs, 5, "the docs name deploy/'s objects")
	assert.Greater(t, ports, 3, "the docs give ports")
}
