package deploytest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/fleetwright/fleetwright/pkg/bus"
)

// TestDeploymentsPassNATSCredentialsApart: in every overlay each service logs in to NATS as its
// own user with NATS_USER and NATS_PASSWORD from the Secret, and its NATS_URL, which the
// service logs, is only the scheme and host from the settings: no password in it.
func TestDeploymentsPassNATSCredentialsApart(t *testing.T) {
	for _, o := range overlays(t) {
		t.Run(o, func(t *testing.T) {
			m := render(t, filepath.Join(root(t), "deploy", "overlays", o))
			var settings *yaml.RNode
			for _, r := range m.Resources() {
				if r.GetKind() == "ConfigMap" && strings.HasPrefix(r.GetName(), "fleetwright-settings") {
					n, err := yaml.Parse(r.MustYaml())
					require.NoError(t, err)
					settings = n
				}
			}
			require.NotNil(t, settings)
			for _, s := range services {
				env := field(t, find(t, m, "Deployment", s), "spec", "template", "spec", "containers", "[name="+s+"]", "env")
				var vars []struct {
					Name      string
					Value     string
					ValueFrom *struct {
						SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
					} `yaml:"valueFrom"`
				}
				require.NoError(t, yaml.Unmarshal([]byte(env), &vars), s)
				byName := map[string]int{}
				for i, v := range vars {
					byName[v.Name] = i
					assert.NotContains(t, v.Value, "NATS_PASSWORD", "%s: %s must not hold the password", s, v.Name)
				}
				require.Contains(t, byName, "NATS_USER", s)
				assert.Equal(t, s, vars[byName["NATS_USER"]].Value, "%s logs in as itself", s)
				require.Contains(t, byName, "NATS_PASSWORD", s)
				pw := vars[byName["NATS_PASSWORD"]].ValueFrom
				require.True(t, pw != nil && pw.SecretKeyRef != nil, "%s: NATS_PASSWORD comes from the Secret", s)
				assert.Equal(t, "fleetwright-nats-users", pw.SecretKeyRef.Name, s)
				assert.Equal(t, s, pw.SecretKeyRef.Key, s)

				require.Contains(t, byName, "NATS_URL", s)
				url := strings.NewReplacer(
					"$(NATS_SCHEME)", field(t, settings, "data", "NATS_SCHEME"),
					"$(NATS_HOST)", field(t, settings, "data", "NATS_HOST"),
				).Replace(vars[byName["NATS_URL"]].Value)
				assert.NotContains(t, url, "$(", "%s: NATS_URL refers only to the settings", s)
				assert.NotContains(t, url, "@", "%s: NATS_URL carries no user info", s)
				assert.Equal(t, url, bus.Redact(url), "%s: NATS_URL %s is shown as it is", s, url)
			}
		})
	}
}
