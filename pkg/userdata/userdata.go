// Package userdata renders the EC2 user data that makes an instance join the cluster as the
// NodeClaim asked: with the NodePool's labels, taints and startup taints, and the kubelet
// settings, for each AMI family, merged with the EC2NodeClass's own user data.
//
//	AL2           MIME multipart: the class's parts, then a shell part calling
//	              /etc/eks/bootstrap.sh --kubelet-extra-args '--node-labels=… --register-with-taints=…'
//	AL2023        MIME multipart: a nodeadm NodeConfig (application/node.eks.aws) whose kubelet
//	              flags carry the labels and taints, then the class's parts
//	Bottlerocket  TOML: the class's own settings with Fleetwright's settings.kubernetes
//	              (cluster, node-labels, node-taints, kubelet settings) merged in, written with
//	              a TOML library
//
// The node class's kubelet settings (Kubelet) and instance-store policy go in each family's own
// way: bootstrap.sh flags and --kubelet-extra-args, NodeConfig spec.kubelet.config and
// spec.instance.localStorage, Bottlerocket settings.kubernetes and bootstrap commands.
//
// Render refuses a label or taint that is not one valid token (ValidLabel, ValidTaint): the
// CRDs refuse them too, but a NodeClaim written by hand or a translated Provisioner must not
// be able to add kubelet flags, systemd or shell lines, or TOML tables to a node's boot.
//
// The AWS emulator (tools/awsemu) reads the same formats back to register the Node, as a
// kubelet would.
package userdata

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/textproto"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Family is an AMI family name as EC2NodeClass spells it.
type Family string

const (
	AL2          Family = "AL2"
	AL2023       Family = "AL2023"
	Bottlerocket Family = "Bottlerocket"
	// Custom is the class's user data as it is: the image bootstraps itself, and the launcher
	// puts the claim's labels and taints on the Node when it registers.
	Custom Family = "Custom"
)

// Taint is a node taint.
type Taint struct{ Key, Value, Effect string }

func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

// Options is everything a node needs to join.
type Options struct {
	ClusterName     string
	ClusterEndpoint string
	ClusterCA       []byte // PEM; may be empty (the node then discovers it)
	ClusterDNS      string
	ClusterCIDR     string // service CIDR, AL2023 needs it
	Labels          map[string]string
	Taints          []Taint // includes startup taints
	// Kubelet is the node class's kubelet settings; its ClusterDNS, when set, replaces
	// ClusterDNS.
	Kubelet Kubelet
	// InstanceStorePolicy is the node class's spec.instanceStorePolicy: "" or RAID0.
	InstanceStorePolicy string
	KubeletFlags        []string
	Custom              string // the EC2NodeClass's spec.userData, merged in
}

// RAID0 is the instance-store policy that makes the instance's local NVMe disks one RAID0
// array for the kubelet's and the container runtime's ephemeral storage.
const RAID0 = "RAID0"

// Kubelet is the kubelet settings of a node class (EC2NodeClass spec.kubelet). Quantities and
// durations are the strings the user wrote; a nil or empty field leaves the AMI's default.
type Kubelet struct {
	MaxPods                     *int32
	PodsPerCore                 *int32
	SystemReserved              map[string]string // cpu, memory, ephemeral-storage, pid
	KubeReserved                map[string]string
	EvictionHard                map[string]string // memory.available, nodefs.available, ...
	EvictionSoft                map[string]string
	EvictionSoftGracePeriod     map[string]string // durations, e.g. 1m30s
	EvictionMaxPodGracePeriod   *int32
	ImageGCHighThresholdPercent *int32
	ImageGCLowThresholdPercent  *int32
	CPUCFSQuota                 *bool
	ClusterDNS                  []string
}

// clusterDNS is the DNS address the node is given: the class's first, else the launcher's.
func (o Options) clusterDNS() string {
	if len(o.Kubelet.ClusterDNS) > 0 {
		return o.Kubelet.ClusterDNS[0]
	}
	return o.ClusterDNS
}

func (o Options) validate() error {
	switch o.InstanceStorePolicy {
	case "", RAID0:
	default:
		return fmt.Errorf("rendering user data: unsupported instanceStorePolicy %q (want RAID0 or none)", o.InstanceStorePolicy)
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
		if err := ValidLabel(k, o.Labels[k]); err != nil {
			errs = append(errs, err)
		}
	}
	for _, t := range o.Taints {
		if err := ValidTaint(t); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, o.Kubelet.validate()...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rendering user data: %w", err)
	}
	return nil
}

// ValidLabel refuses a node label the kubelet would not take: the key must be a qualified name
// and the value a label value. Each is then one token in --node-labels, a NodeConfig flag or a
// TOML key, and cannot add a flag, a line or another label.
func ValidLabel(key, value string) error {
	msgs := append(validation.IsQualifiedName(key), validation.IsValidLabelValue(value)...)
	if len(msgs) > 0 {
		return fmt.Errorf("label %q=%q: %s", key, value, strings.Join(msgs, "; "))
	}
	return nil
}

// ValidTaint refuses a taint the kubelet would not register with: the key must be a qualified
// name, the value a label value, the effect NoSchedule, PreferNoSchedule or NoExecute.
func ValidTaint(t Taint) error {
	msgs := validation.IsQualifiedName(t.Key)
	if t.Value != "" {
		msgs = append(msgs, validation.IsValidLabelValue(t.Value)...)
	}
	if err := validEffect(t); err != nil {
		msgs = append(msgs, fmt.Sprintf("unknown effect %q (want NoSchedule, PreferNoSchedule or NoExecute)", t.Effect))
	}
	if len(msgs) > 0 {
		return fmt.Errorf("taint %q: %s", t.String(), strings.Join(msgs, "; "))
	}
	return nil
}

// Render returns the user data, not base64-encoded.
func Render(family Family, o Options) (string, error) {
	if o.ClusterName == "" {
		return "", fmt.Errorf("rendering user data: cluster name is required")
	}
	if err := o.validate(); err != nil {
		return "", err
	}
	switch family {
	case AL2, "":
		return renderAL2(o)
	case AL2023:
		return renderAL2023(o)
	case Bottlerocket:
		return renderBottlerocket(o)
	case Custom:
		return o.Custom, nil
	default:
		return "", fmt.Errorf("rendering user data: unsupported AMI family %q (want AL2, AL2023, Bottlerocket or Custom)", family)
	}
}

// NodeLabelsFlag renders --node-labels as the kubelet takes it, keys sorted.
func NodeLabelsFlag(labels map[string]string) string {
	return "--node-labels=" + joinMap(labels, "=")
}

// TaintsFlag renders --register-with-taints.
func TaintsFlag(taints []Taint) string {
	parts := make([]string, 0, len(taints))
	for _, t := range taints {
		parts = append(parts, t.String())
	}
	return "--register-with-taints=" + strings.Join(parts, ",")
}

func kubeletFlags(o Options) []string {
	var flags []string
	if len(o.Labels) > 0 {
		flags = append(flags, NodeLabelsFlag(o.Labels))
	}
	if len(o.Taints) > 0 {
		flags = append(flags, TaintsFlag(o.Taints))
	}
	flags = append(flags, o.Kubelet.flags()...)
	return append(flags, o.KubeletFlags...)
}

// kubeletSetting is one of Kubelet's settings under the name each format gives it: the
// kubelet flag (AL2's --kubelet-extra-args), the KubeletConfiguration field (AL2023's
// NodeConfig) and the Bottlerocket settings.kubernetes key ("" where Bottlerocket has none).
// Exactly one of n, m and b points at the Kubelet's field.
type kubeletSetting struct {
	flag, field, bottlerocket string
	sep                       string // in a map's flag, between each key and its value
	n                         **int32
	m                         *map[string]string
	b                         **bool
	// keys are the keys a map may have, and check checks one of its values: each must be one
	// token of its kind, for it goes into AL2's --kubelet-extra-args (split on spaces) and
	// Bottlerocket's TOML.
	keys  []string
	check func(string) error
}

// ReservedResources are the keys of systemReserved and kubeReserved, and EvictionSignals those
// of evictionHard, evictionSoft and evictionSoftGracePeriod: Karpenter's (the CRDs hold the
// same lists).
var (
	ReservedResources = []string{"cpu", "memory", "ephemeral-storage", "pid"}
	EvictionSignals   = []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"}
)

// percentage is an eviction threshold in percent, as the kubelet reads one.
var percentage = regexp.MustCompile(`^(100(\.0+)?|[0-9]{1,2}(\.[0-9]+)?)%$`)

// quantity accepts a non-negative resource quantity.
func quantity(v string) error {
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() < 0 {
		return errors.New("not a non-negative quantity")
	}
	return nil
}

// threshold accepts an eviction threshold: a percentage or a quantity.
func threshold(v string) error {
	if percentage.MatchString(v) || quantity(v) == nil {
		return nil
	}
	return errors.New("not a percentage or a quantity")
}

// duration accepts a Go duration (1m30s).
func duration(v string) error {
	if d, err := time.ParseDuration(v); err != nil || d < 0 {
		return errors.New("not a duration")
	}
	return nil
}

// validate refuses, naming each, a map key the kubelet does not know for its setting and a value
// that is not one token of its kind.
func (k *Kubelet) validate() []error {
	var errs []error
	for _, s := range k.settings() {
		if s.m == nil {
			continue
		}
		m := *s.m
		for _, key := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(s.keys, key) {
				errs = append(errs, fmt.Errorf("kubelet %s key %q: want one of %s", s.field, key, strings.Join(s.keys, ", ")))
				continue
			}
			if err := s.check(m[key]); err != nil {
				errs = append(errs, fmt.Errorf("kubelet %s[%q] value %q: %w", s.field, key, m[key], err))
			}
		}
	}
	return errs
}

// settings lists k's settings (all but ClusterDNS), in the order the flags are written.
func (k *Kubelet) settings() []kubeletSetting {
	return []kubeletSetting{
		{flag: "max-pods", field: "maxPods", bottlerocket: "max-pods", n: &k.MaxPods},
		{flag: "pods-per-core", field: "podsPerCore", n: &k.PodsPerCore},
		{flag: "system-reserved", field: "systemReserved", bottlerocket: "system-reserved", sep: "=", m: &k.SystemReserved, keys: ReservedResources, check: quantity},
		{flag: "kube-reserved", field: "kubeReserved", bottlerocket: "kube-reserved", sep: "=", m: &k.KubeReserved, keys: ReservedResources, check: quantity},
		{flag: "eviction-hard", field: "evictionHard", bottlerocket: "eviction-hard", sep: "<", m: &k.EvictionHard, keys: EvictionSignals, check: threshold},
		{flag: "eviction-soft", field: "evictionSoft", bottlerocket: "eviction-soft", sep: "<", m: &k.EvictionSoft, keys: EvictionSignals, check: threshold},
		{flag: "eviction-soft-grace-period", field: "evictionSoftGracePeriod", bottlerocket: "eviction-soft-grace-period", sep: "=", m: &k.EvictionSoftGracePeriod,
			keys: EvictionSignals, check: duration},
		{flag: "eviction-max-pod-grace-period", field: "evictionMaxPodGracePeriod", bottlerocket: "eviction-max-pod-grace-period", n: &k.EvictionMaxPodGracePeriod},
		{flag: "image-gc-high-threshold", field: "imageGCHighThresholdPercent", bottlerocket: "image-gc-high-threshold-percent", n: &k.ImageGCHighThresholdPercent},
		{flag: "image-gc-low-threshold", field: "imageGCLowThresholdPercent", bottlerocket: "image-gc-low-threshold-percent", n: &k.ImageGCLowThresholdPercent},
		{flag: "cpu-cfs-quota", field: "cpuCFSQuota", bottlerocket: "cpu-cfs-quota-enforced", b: &k.CPUCFSQuota},
	}
}

// value is the setting's value (an int64, a map[string]string or a bool); nil when it is unset
// (an empty map is unset).
func (s kubeletSetting) value() any {
	switch {
	case s.n != nil && *s.n != nil:
		return int64(**s.n)
	case s.m != nil && len(*s.m) > 0:
		return *s.m
	case s.b != nil && *s.b != nil:
		return **s.b
	}
	return nil
}

// flags renders the settings as kubelet command-line flags (AL2's --kubelet-extra-args), in a
// fixed order.
func (k Kubelet) flags() []string {
	var out []string
	for _, s := range k.settings() {
		switch v := s.value().(type) {
		case nil:
		case map[string]string:
			out = append(out, "--"+s.flag+"="+joinMap(v, s.sep))
		default:
			out = append(out, fmt.Sprintf("--%s=%v", s.flag, v))
		}
	}
	return out
}

// config renders the settings as KubeletConfiguration fields (AL2023's NodeConfig).
func (k Kubelet) config() map[string]any {
	cfg := map[string]any{}
	for _, s := range k.settings() {
		if v := s.value(); v != nil {
			cfg[s.field] = v
		}
	}
	if len(k.ClusterDNS) > 0 {
		cfg["clusterDNS"] = k.ClusterDNS
	}
	return cfg
}

// joinMap renders k1<sep>v1,k2<sep>v2 with keys sorted.
func joinMap(m map[string]string, sep string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+sep+m[k])
	}
	return strings.Join(parts, ",")
}

func renderAL2(o Options) (string, error) {
	var sh strings.Builder
	sh.WriteString("#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	fmt.Fprintf(&sh, "/etc/eks/bootstrap.sh %s", shellQuote(o.ClusterName))
	if o.ClusterEndpoint != "" {
		fmt.Fprintf(&sh, " \\\n  --apiserver-endpoint %s", shellQuote(o.ClusterEndpoint))
	}
	if len(o.ClusterCA) > 0 {
		fmt.Fprintf(&sh, " \\\n  --b64-cluster-ca %s", shellQuote(base64.StdEncoding.EncodeToString(o.ClusterCA)))
	}
	if dns := o.clusterDNS(); dns != "" {
		fmt.Fprintf(&sh, " \\\n  --dns-cluster-ip %s", shellQuote(dns))
	}
	if o.Kubelet.MaxPods != nil {
		// Otherwise bootstrap.sh adds its own ENI-derived --max-pods.
		sh.WriteString(" \\\n  --use-max-pods false")
	}
	if o.InstanceStorePolicy == RAID0 {
		sh.WriteString(" \\\n  --local-disks raid0")
	}
	flags := kubeletFlags(o)
	if len(flags) > 0 {
		fmt.Fprintf(&sh, " \\\n  --kubelet-extra-args %s", shellQuote(strings.Join(flags, " ")))
	}
	sh.WriteString("\n")
	parts, err := customParts(o.Custom)
	if err != nil {
		return "", err
	}
	return multipartDoc(append(parts, part{"text/x-shellscript; charset=\"us-ascii\"", sh.String()})), nil
}

// nodeConfig is the subset of nodeadm's NodeConfig (node.eks.aws/v1alpha1) Fleetwright writes.
type nodeConfig struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       nodeConfigSpec `json:"spec"`
}

type nodeConfigSpec struct {
	Cluster struct {
		Name                 string `json:"name"`
		APIServerEndpoint    string `json:"apiServerEndpoint,omitempty"`
		CertificateAuthority []byte `json:"certificateAuthority,omitempty"`
		CIDR                 string `json:"cidr,omitempty"`
	} `json:"cluster"`
	Kubelet struct {
		Config map[string]any `json:"config,omitempty"`
		Flags  []string       `json:"flags,omitempty"`
	} `json:"kubelet"`
	Instance *nodeConfigInstance `json:"instance,omitempty"`
}

type nodeConfigInstance struct {
	LocalStorage struct {
		Strategy string `json:"strategy,omitempty"`
	} `json:"localStorage"`
}

func renderAL2023(o Options) (string, error) {
	var nc nodeConfig
	nc.APIVersion, nc.Kind = "node.eks.aws/v1alpha1", "NodeConfig"
	nc.Spec.Cluster.Name = o.ClusterName
	nc.Spec.Cluster.APIServerEndpoint = o.ClusterEndpoint
	nc.Spec.Cluster.CertificateAuthority = o.ClusterCA
	nc.Spec.Cluster.CIDR = o.ClusterCIDR
	cfg := o.Kubelet.config()
	if dns := o.clusterDNS(); dns != "" && len(o.Kubelet.ClusterDNS) == 0 {
		cfg["clusterDNS"] = []string{dns}
	}
	if len(cfg) > 0 {
		nc.Spec.Kubelet.Config = cfg
	}
	var flags []string
	if len(o.Labels) > 0 {
		flags = append(flags, NodeLabelsFlag(o.Labels))
	}
	if len(o.Taints) > 0 {
		flags = append(flags, TaintsFlag(o.Taints))
	}
	nc.Spec.Kubelet.Flags = append(flags, o.KubeletFlags...)
	if o.InstanceStorePolicy == RAID0 {
		nc.Spec.Instance = &nodeConfigInstance{}
		nc.Spec.Instance.LocalStorage.Strategy = RAID0
	}
	doc, err := yaml.Marshal(nc)
	if err != nil {
		return "", fmt.Errorf("rendering NodeConfig: %w", err)
	}
	parts, err := customParts(o.Custom)
	if err != nil {
		return "", err
	}
	// nodeadm merges NodeConfigs in order; ours comes first so the class's own can refine it.
	return multipartDoc(append([]part{{"application/node.eks.aws", string(doc)}}, parts...)), nil
}

type part struct{ contentType, body string }

// customParts splits the class's user data: a MIME multipart document contributes its parts;
// anything else is one shell-script part (AL2) or NodeConfig (AL2023 detects by content).
func customParts(custom string) ([]part, error) {
	custom = strings.TrimSpace(custom)
	if custom == "" {
		return nil, nil
	}
	if !strings.HasPrefix(custom, "MIME-Version:") {
		ct := "text/x-shellscript; charset=\"us-ascii\""
		if strings.Contains(custom, "kind: NodeConfig") {
			ct = "application/node.eks.aws"
		}
		return []part{{ct, custom + "\n"}}, nil
	}
	parts, err := ParseMultipart(custom)
	if err != nil {
		return nil, fmt.Errorf("parsing the node class's user data: %w", err)
	}
	out := make([]part, 0, len(parts))
	for _, p := range parts {
		out = append(out, part{p.ContentType, p.Body})
	}
	return out, nil
}

// Part is one part of a MIME multipart user-data document.
type Part struct{ ContentType, Body string }

// ParseMultipart reads a MIME multipart document (the headers, a blank line, the body).
func ParseMultipart(doc string) ([]Part, error) {
	doc = strings.ReplaceAll(doc, "\r\n", "\n")
	head, body, ok := strings.Cut(doc, "\n\n")
	if !ok {
		return nil, fmt.Errorf("no blank line after the MIME headers")
	}
	var contentType string
	for _, line := range strings.Split(head, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "Content-Type") {
			contentType = strings.TrimSpace(v)
		}
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		return nil, fmt.Errorf("content type %q is not multipart", contentType)
	}
	r := multipart.NewReader(strings.NewReader(body), params["boundary"])
	var out []Part
	for {
		p, err := r.NextPart()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, fmt.Errorf("reading MIME part: %w", err)
		}
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(p); err != nil {
			return out, fmt.Errorf("reading MIME part: %w", err)
		}
		out = append(out, Part{ContentType: p.Header.Get("Content-Type"), Body: buf.String()})
	}
}

const boundary = "//"

func multipartDoc(parts []part) string {
	var b bytes.Buffer
	b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"" + boundary + "\"\n\n")
	w := multipart.NewWriter(&b)
	_ = w.SetBoundary(boundary)
	for _, p := range parts {
		pw, _ := w.CreatePart(textproto.MIMEHeader{"Content-Type": {p.contentType}})
		_, _ = pw.Write([]byte(p.body))
	}
	_ = w.Close()
	return strings.ReplaceAll(b.String(), "\r\n", "\n")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
