package deploytest

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

type netpol struct {
	Metadata struct{ Name string }
	Spec     struct {
		PodSelector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"podSelector"`
		PolicyTypes []string `yaml:"policyTypes"`
		Ingress     []struct {
			Ports []struct{ Port any }
			From  []struct {
				PodSelector *struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"podSelector"`
				NamespaceSelector any `yaml:"namespaceSelector"`
				IPBlock           any `yaml:"ipBlock"`
			}
		}
	}
}

// TestNetworkPoliciesCoverEverything: in every overlay each Deployment, the NATS StatefulSet
// and the audit job are selected by a NetworkPolicy that restricts both directions, and the
// NATS route port admits the NATS pods only.
func TestNetworkPoliciesCoverEverything(t *testing.T) {
	for _, o := range overlays(t) {
		t.Run(o, func(t *testing.T) {
			m := render(t, filepath.Join(root(t), "deploy", "overlays", o))
			var pols []netpol
			for _, r := range m.Resources() {
				if r.GetKind() == "NetworkPolicy" {
					var p netpol
					require.NoError(t, yaml.Unmarshal([]byte(r.MustYaml()), &p))
					pols = append(pols, p)
				}
			}
			selecting := func(labels map[string]string) []netpol {
				var out []netpol
				for _, p := range pols {
					match := len(p.Spec.PodSelector.MatchLabels) > 0
					for k, v := range p.Spec.PodSelector.MatchLabels {
						match = match && labels[k] == v
					}
					if match {
						out = append(out, p)
					}
				}
				return out
			}
			workloads := 0
			for _, r := range m.Resources() {
				kind := r.GetKind()
				if kind != "Deployment" && kind != "StatefulSet" && kind != "Job" {
					continue
				}
				workloads++
				n, err := yaml.Parse(r.MustYaml())
				require.NoError(t, err)
				labels, err := n.Pipe(yaml.Lookup("spec", "template", "metadata", "labels"))
				require.NoError(t, err)
				require.NotNil(t, labels, "%s %s has pod labels", kind, r.GetName())
				pl := map[string]string{}
				require.NoError(t, labels.YNode().Decode(&pl))
				ps := selecting(pl)
				require.NotEmpty(t, ps, "no NetworkPolicy selects the pods of %s %s", kind, r.GetName())
				require.ElementsMatch(t, []string{"Ingress", "Egress"}, ps[0].Spec.PolicyTypes, "%s %s", kind, r.GetName())
			}
			require.Equal(t, len(services)+2, workloads, "the four services, NATS and the audit job")

			nats := selecting(map[string]string{"app.kubernetes.io/name": "nats"})
			require.Len(t, nats, 1)
			routeRules := 0
			for _, rule := range nats[0].Spec.Ingress {
				for _, port := range rule.Ports {
					if port.Port != 6222 && port.Port != "cluster" {
						continue
					}
					routeRules++
					require.NotEmpty(t, rule.From, "the route port is open to everyone")
					for _, from := range rule.From {
						require.Nil(t, from.NamespaceSelector, "the route port admits other namespaces")
						require.Nil(t, from.IPBlock, "the route port admits an ipBlock")
						require.NotNil(t, from.PodSelector)
						require.Equal(t, map[string]string{"app.kubernetes.io/name": "nats"}, from.PodSelector.MatchLabels,
							"the route port admits pods other than NATS")
					}
				}
			}
			require.Equal(t, 1, routeRules, "one ingress rule for the route port")
		})
	}
}
