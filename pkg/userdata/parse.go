package userdata

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Registration is what a kubelet started from some user data registers with.
type Registration struct {
	// Family is the AMI family whose format the user data is in ("" when none was recognised).
	Family      Family
	ClusterName string
	Labels      map[string]string
	Taints      []Taint
	// Kubelet is the kubelet settings the user data sets (ClusterDNS included).
	Kubelet Kubelet
	// InstanceStorePolicy is RAID0 when the user data RAIDs the instance stores, else "".
	InstanceStorePolicy string
}

// Parse reads user data as a node would: AL2 bootstrap.sh kubelet flags, AL2023 nodeadm
// NodeConfig kubelet flags (later NodeConfigs refine earlier ones), or Bottlerocket TOML.
// The document may be base64-encoded.
func Parse(doc string) (Registration, error) {
	reg := Registration{Labels: map[string]string{}}
	doc = maybeBase64(doc)
	trimmed := strings.TrimSpace(doc)
	switch {
	case strings.HasPrefix(trimmed, "MIME-Version:"):
		parts, err := ParseMultipart(trimmed)
		if err != nil {
			return reg, err
		}
		for _, p := range parts {
			if err := parsePart(p, &reg); err != nil {
				return reg, err
			}
		}
	case strings.Contains(trimmed, "[settings"):
		if err := parseBottlerocket(trimmed, &reg); err != nil {
			return reg, err
		}
	default:
		if err := parsePart(Part{ContentType: "text/x-shellscript", Body: trimmed}, &reg); err != nil {
			return reg, err
		}
	}
	return reg, nil
}

func parsePart(p Part, reg *Registration) error {
	switch {
	case strings.HasPrefix(p.ContentType, "application/node.eks.aws") || strings.Contains(p.Body, "kind: NodeConfig"):
		var nc nodeConfig
		if err := yaml.Unmarshal([]byte(p.Body), &nc); err != nil {
			return fmt.Errorf("parsing NodeConfig: %w", err)
		}
		reg.Family = AL2023
		if nc.Spec.Cluster.Name != "" {
			reg.ClusterName = nc.Spec.Cluster.Name
		}
		readKubeletConfig(nc.Spec.Kubelet.Config, &reg.Kubelet)
		if nc.Spec.Instance != nil && nc.Spec.Instance.LocalStorage.Strategy != "" {
			reg.InstanceStorePolicy = nc.Spec.Instance.LocalStorage.Strategy
		}
		// KubeletConfiguration's registerWithTaints, a list of {key, value, effect}.
		if list, ok := nc.Spec.Kubelet.Config["registerWithTaints"].([]any); ok {
			for _, item := range list {
				m, _ := item.(map[string]any)
				t := Taint{Key: str(m["key"]), Value: str(m["value"]), Effect: str(m["effect"])}
				if err := validEffect(t); err != nil {
					return err
				}
				reg.Taints = append(reg.Taints, t)
			}
		}
		if err := applyFlags(nc.Spec.Kubelet.Flags, reg); err != nil {
			return err
		}
	case strings.Contains(p.Body, "/etc/eks/bootstrap.sh"):
		reg.Family = AL2
		if m := bootstrapCluster.FindStringSubmatch(p.Body); m != nil {
			reg.ClusterName = unquote(m[1])
		}
		if m := dnsClusterIP.FindStringSubmatch(p.Body); m != nil {
			reg.Kubelet.ClusterDNS = []string{unquote(m[1])}
		}
		if localDisks.MatchString(p.Body) {
			reg.InstanceStorePolicy = RAID0
		}
		if m := extraArgs.FindStringSubmatch(p.Body); m != nil {
			if err := applyFlags(strings.Fields(unquote(m[1])), reg); err != nil {
				return err
			}
		}
	}
	return nil
}

var (
	bootstrapCluster = regexp.MustCompile(`/etc/eks/bootstrap\.sh\s+('[^']*'|"[^"]*"|\S+)`)
	extraArgs        = regexp.MustCompile(`--kubelet-extra-args\s+('[^']*'|"[^"]*")`)
	dnsClusterIP     = regexp.MustCompile(`--dns-cluster-ip\s+('[^']*'|"[^"]*"|\S+)`)
	localDisks       = regexp.MustCompile(`--local-disks\s+'?raid0'?`)
)

func applyFlags(flags []string, reg *Registration) error {
	for _, f := range flags {
		name, value, _ := strings.Cut(f, "=")
		value = strings.Trim(value, `"`)
		switch name {
		case "--node-labels":
			for _, kv := range strings.Split(value, ",") {
				if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
					reg.Labels[k] = v
				}
			}
		case "--register-with-taints":
			for _, t := range strings.Split(value, ",") {
				if t == "" {
					continue
				}
				kv, effect, _ := strings.Cut(t, ":")
				k, v, _ := strings.Cut(kv, "=")
				taint := Taint{Key: k, Value: v, Effect: effect}
				if err := validEffect(taint); err != nil {
					return err
				}
				reg.Taints = append(reg.Taints, taint)
			}
		case "--cluster-dns":
			reg.Kubelet.ClusterDNS = strings.Split(value, ",")
		default:
			for _, s := range reg.Kubelet.settings() {
				if name == "--"+s.flag {
					s.read(s.parseFlag(value))
				}
			}
		}
	}
	return nil
}

// splitMap reads k1<sep>v1,k2<sep>v2.
func splitMap(s, sep string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, sep); ok && k != "" {
			out[k] = v
		}
	}
	return out
}

// read sets the setting from a value read back: an integer (int64 from TOML, float64 from
// YAML), a map (of strings, or of anything, as TOML and YAML decode it) or a bool. A value of
// another type, or none, leaves the setting as it was.
func (s kubeletSetting) read(v any) {
	switch {
	case s.n != nil:
		var n int32
		switch v := v.(type) {
		case int64:
			n = int32(v)
		case float64:
			n = int32(v)
		default:
			return
		}
		*s.n = &n
	case s.m != nil:
		switch m := v.(type) {
		case map[string]string:
			*s.m = m
		case map[string]any:
			out := make(map[string]string, len(m))
			for k, v := range m {
				out[k] = fmt.Sprint(v)
			}
			*s.m = out
		}
	case s.b != nil:
		if b, ok := v.(bool); ok {
			*s.b = &b
		}
	}
}

// parseFlag reads a kubelet flag's value as the setting's type, for read; nil when it does not
// parse.
func (s kubeletSetting) parseFlag(value string) any {
	switch {
	case s.n != nil:
		if n, err := strconv.ParseInt(value, 10, 32); err == nil {
			return n
		}
	case s.m != nil:
		return splitMap(value, s.sep)
	case s.b != nil:
		if b, err := strconv.ParseBool(value); err == nil {
			return b
		}
	}
	return nil
}

// readKubeletConfig reads KubeletConfiguration fields (as YAML decodes them) over k: a later
// NodeConfig's settings replace an earlier one's.
func readKubeletConfig(cfg map[string]any, k *Kubelet) {
	for _, s := range k.settings() {
		s.read(cfg[s.field])
	}
	if list, ok := cfg["clusterDNS"].([]any); ok {
		k.ClusterDNS = nil
		for _, d := range list {
			k.ClusterDNS = append(k.ClusterDNS, str(d))
		}
	}
}

// validEffect rejects a taint the kubelet would refuse to register with.
func validEffect(t Taint) error {
	switch t.Effect {
	case "NoSchedule", "PreferNoSchedule", "NoExecute":
		return nil
	}
	return fmt.Errorf("taint %s: unknown effect %q (want NoSchedule, PreferNoSchedule or NoExecute)", t, t.Effect)
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '\'' && s[len(s)-1] == '\'') {
		return strings.ReplaceAll(s[1:len(s)-1], `'\''`, "'")
	}
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

func maybeBase64(doc string) string {
	t := strings.TrimSpace(doc)
	if t == "" || strings.ContainsAny(t[:min(len(t), 64)], " \n:#[") {
		return doc
	}
	if b, err := base64.StdEncoding.DecodeString(t); err == nil {
		return string(b)
	}
	return doc
}
