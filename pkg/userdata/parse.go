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
	ClusterName string
	Labels      map[string]string
	Taints      []Taint
	MaxPods     int // 0 when not set
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
	case strings.Contains(trimmed, "[settings.kubernetes"):
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
		if nc.Spec.Cluster.Name != "" {
			reg.ClusterName = nc.Spec.Cluster.Name
		}
		if v, ok := nc.Spec.Kubelet.Config["maxPods"]; ok {
			if f, ok := v.(float64); ok {
				reg.MaxPods = int(f)
			}
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
		if m := bootstrapCluster.FindStringSubmatch(p.Body); m != nil {
			reg.ClusterName = unquote(m[1])
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
		case "--max-pods":
			if n, err := strconv.Atoi(value); err == nil {
				reg.MaxPods = n
			}
		}
	}
	return nil
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

// parseBottlerocket reads the few TOML tables Fleetwright writes; it is not a TOML parser.
func parseBottlerocket(doc string, reg *Registration) error {
	table := ""
	for _, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			table = strings.Trim(line, "[]")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = unquote(strings.TrimSpace(k)), strings.TrimSpace(v)
		switch table {
		case "settings.kubernetes":
			switch k {
			case "cluster-name":
				reg.ClusterName = unquote(v)
			case "max-pods":
				reg.MaxPods, _ = strconv.Atoi(v)
			}
		case "settings.kubernetes.node-labels":
			reg.Labels[k] = unquote(v)
		case "settings.kubernetes.node-taints":
			for _, item := range strings.Split(strings.Trim(v, "[]"), ",") {
				val, effect, _ := strings.Cut(unquote(strings.TrimSpace(item)), ":")
				taint := Taint{Key: k, Value: val, Effect: effect}
				if err := validEffect(taint); err != nil {
					return err
				}
				reg.Taints = append(reg.Taints, taint)
			}
		}
	}
	return nil
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
