package userdata

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Bottlerocket user data is one TOML document. As Karpenter does, the class's own document is
// decoded, Fleetwright's settings are set in it (the cluster's settings, the node's labels and
// taints and the kubelet settings win over the class's; the class's other labels, taints and
// settings are kept), and the result is encoded again.

// raid0Command is the bootstrap command that makes the instance stores one RAID0 array and
// binds the kubelet's, the runtime's and the pods' log directories onto it.
const raid0Command = "000-mount-instance-storage"

func renderBottlerocket(o Options) (string, error) {
	// A kubelet setting Bottlerocket has no key for is refused before anything else, whatever
	// the class's own user data holds.
	for _, s := range o.Kubelet.settings() {
		if s.bottlerocket == "" && s.value() != nil {
			return "", fmt.Errorf("rendering user data: kubelet %s is not supported on Bottlerocket (its settings have no %s)", s.field, s.flag)
		}
	}
	doc := map[string]any{}
	if strings.TrimSpace(o.Custom) != "" {
		if _, err := toml.Decode(o.Custom, &doc); err != nil {
			return "", fmt.Errorf("parsing the node class's Bottlerocket user data as TOML: %w", err)
		}
	}
	settings, err := table(doc, "settings")
	if err != nil {
		return "", err
	}
	kube, err := table(settings, "kubernetes")
	if err != nil {
		return "", err
	}
	kube["cluster-name"] = o.ClusterName
	if o.ClusterEndpoint != "" {
		kube["api-server"] = o.ClusterEndpoint
	}
	if len(o.ClusterCA) > 0 {
		kube["cluster-certificate"] = base64.StdEncoding.EncodeToString(o.ClusterCA)
	}
	if dns := o.clusterDNS(); dns != "" {
		kube["cluster-dns-ip"] = dns
	}
	for _, s := range o.Kubelet.settings() {
		v := s.value()
		if m, ok := v.(map[string]string); ok {
			v = toAny(m)
		}
		if v != nil {
			kube[s.bottlerocket] = v
		}
	}
	if len(o.Labels) > 0 {
		labels, err := table(kube, "node-labels")
		if err != nil {
			return "", err
		}
		for key, v := range o.Labels {
			labels[key] = v
		}
	}
	if len(o.Taints) > 0 {
		taints, err := table(kube, "node-taints")
		if err != nil {
			return "", err
		}
		ours := map[string][]any{}
		for _, t := range o.Taints {
			ours[t.Key] = append(ours[t.Key], t.Value+":"+t.Effect)
		}
		for key, vs := range ours {
			taints[key] = vs
		}
	}
	if o.InstanceStorePolicy == RAID0 {
		cmds, err := table(settings, "bootstrap-commands")
		if err != nil {
			return "", err
		}
		cmds[raid0Command] = map[string]any{
			"commands": []any{
				[]any{"apiclient", "ephemeral-storage", "init"},
				[]any{"apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"},
			},
			"mode":      "always",
			"essential": true,
		}
	}
	var b bytes.Buffer
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	if err := enc.Encode(doc); err != nil {
		return "", fmt.Errorf("rendering Bottlerocket settings: %w", err)
	}
	return b.String(), nil
}

// table returns parent[key] as a table, making it if absent; a key that holds something else
// is an error (the class's user data gave it another type).
func table(parent map[string]any, key string) (map[string]any, error) {
	switch v := parent[key].(type) {
	case nil:
		t := map[string]any{}
		parent[key] = t
		return t, nil
	case map[string]any:
		return v, nil
	default:
		return nil, fmt.Errorf("the node class's Bottlerocket user data has %q as a %T, not a table", key, v)
	}
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// parseBottlerocket reads Bottlerocket TOML settings as the node's agent does.
func parseBottlerocket(doc string, reg *Registration) error {
	root := map[string]any{}
	if _, err := toml.Decode(doc, &root); err != nil {
		return fmt.Errorf("parsing Bottlerocket TOML: %w", err)
	}
	reg.Family = Bottlerocket
	settings, _ := root["settings"].(map[string]any)
	kube, _ := settings["kubernetes"].(map[string]any)
	reg.ClusterName = str(kube["cluster-name"])
	k := &reg.Kubelet
	for _, s := range k.settings() {
		if s.bottlerocket != "" {
			s.read(kube[s.bottlerocket])
		}
	}
	switch dns := kube["cluster-dns-ip"].(type) {
	case string:
		k.ClusterDNS = []string{dns}
	case []any:
		for _, d := range dns {
			k.ClusterDNS = append(k.ClusterDNS, str(d))
		}
	}
	if labels, ok := kube["node-labels"].(map[string]any); ok {
		for key, v := range labels {
			reg.Labels[key] = str(v)
		}
	}
	if taints, ok := kube["node-taints"].(map[string]any); ok {
		keys := sortedKeys(taints)
		for _, key := range keys {
			var values []any
			switch v := taints[key].(type) {
			case []any:
				values = v
			case string:
				values = []any{v}
			}
			for _, item := range values {
				val, effect, _ := strings.Cut(str(item), ":")
				taint := Taint{Key: key, Value: val, Effect: effect}
				if err := validEffect(taint); err != nil {
					return err
				}
				reg.Taints = append(reg.Taints, taint)
			}
		}
	}
	if cmds, ok := settings["bootstrap-commands"].(map[string]any); ok {
		for _, c := range cmds {
			if cmd, ok := c.(map[string]any); ok && strings.Contains(fmt.Sprint(cmd["commands"]), "ephemeral-storage init") {
				reg.InstanceStorePolicy = RAID0
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}
