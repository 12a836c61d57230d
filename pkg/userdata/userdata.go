// Package userdata renders the EC2 user data that makes an instance join the cluster as the
// NodeClaim asked: with the NodePool's labels, taints and startup taints, and the kubelet
// settings, for each AMI family, merged with the EC2NodeClass's own user data.
//
//	AL2           MIME multipart: the class's parts, then a shell part calling
//	              /etc/eks/bootstrap.sh --kubelet-extra-args '--node-labels=… --register-with-taints=…'
//	AL2023        MIME multipart: a nodeadm NodeConfig (application/node.eks.aws) whose kubelet
//	              flags carry the labels and taints, then the class's parts
//	Bottlerocket  TOML: settings.kubernetes with node-labels and node-taints tables
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
	"mime"
	"mime/multipart"
	"net/textproto"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Family is an AMI family name as EC2NodeClass spells it.
type Family string

const (
	AL2          Family = "AL2"
	AL2023       Family = "AL2023"
	Bottlerocket Family = "Bottlerocket"
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
	MaxPods         int     // 0 = leave the AMI's default
	KubeletFlags    []string
	Custom          string // the EC2NodeClass's spec.userData, merged in
}

// Render returns the user data, not base64-encoded.
func Render(family Family, o Options) (string, error) {
	if o.ClusterName == "" {
		return "", fmt.Errorf("rendering user data: cluster name is required")
	}
	switch family {
	case AL2, "":
		return renderAL2(o)
	case AL2023:
		return renderAL2023(o)
	case Bottlerocket:
		return renderBottlerocket(o), nil
	default:
		return "", fmt.Errorf("rendering user data: unsupported AMI family %q (want AL2, AL2023 or Bottlerocket)", family)
	}
}

// NodeLabelsFlag renders --node-labels as the kubelet takes it, keys sorted.
func NodeLabelsFlag(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return "--node-labels=" + strings.Join(parts, ",")
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
	return append(flags, o.KubeletFlags...)
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
	if o.ClusterDNS != "" {
		fmt.Fprintf(&sh, " \\\n  --dns-cluster-ip %s", shellQuote(o.ClusterDNS))
	}
	flags := kubeletFlags(o)
	if o.MaxPods > 0 {
		sh.WriteString(" \\\n  --use-max-pods false")
		flags = append(flags, "--max-pods="+strconv.Itoa(o.MaxPods))
	}
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
}

func renderAL2023(o Options) (string, error) {
	var nc nodeConfig
	nc.APIVersion, nc.Kind = "node.eks.aws/v1alpha1", "NodeConfig"
	nc.Spec.Cluster.Name = o.ClusterName
	nc.Spec.Cluster.APIServerEndpoint = o.ClusterEndpoint
	nc.Spec.Cluster.CertificateAuthority = o.ClusterCA
	nc.Spec.Cluster.CIDR = o.ClusterCIDR
	cfg := map[string]any{}
	if o.MaxPods > 0 {
		cfg["maxPods"] = o.MaxPods
	}
	if o.ClusterDNS != "" {
		cfg["clusterDNS"] = []string{o.ClusterDNS}
	}
	if len(cfg) > 0 {
		nc.Spec.Kubelet.Config = cfg
	}
	nc.Spec.Kubelet.Flags = kubeletFlags(o)
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

func renderBottlerocket(o Options) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(o.Custom))
	if o.Custom != "" {
		b.WriteString("\n\n")
	}
	b.WriteString("[settings.kubernetes]\n")
	fmt.Fprintf(&b, "cluster-name = %q\n", o.ClusterName)
	if o.ClusterEndpoint != "" {
		fmt.Fprintf(&b, "api-server = %q\n", o.ClusterEndpoint)
	}
	if len(o.ClusterCA) > 0 {
		fmt.Fprintf(&b, "cluster-certificate = %q\n", base64.StdEncoding.EncodeToString(o.ClusterCA))
	}
	if o.ClusterDNS != "" {
		fmt.Fprintf(&b, "cluster-dns-ip = %q\n", o.ClusterDNS)
	}
	if o.MaxPods > 0 {
		fmt.Fprintf(&b, "max-pods = %d\n", o.MaxPods)
	}
	if len(o.Labels) > 0 {
		b.WriteString("\n[settings.kubernetes.node-labels]\n")
		keys := make([]string, 0, len(o.Labels))
		for k := range o.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%q = %q\n", k, o.Labels[k])
		}
	}
	if len(o.Taints) > 0 {
		b.WriteString("\n[settings.kubernetes.node-taints]\n")
		byKey := map[string][]string{}
		var keys []string
		for _, t := range o.Taints {
			if _, ok := byKey[t.Key]; !ok {
				keys = append(keys, t.Key)
			}
			byKey[t.Key] = append(byKey[t.Key], t.Value+":"+t.Effect)
		}
		for _, k := range keys {
			quoted := make([]string, 0, len(byKey[k]))
			for _, v := range byKey[k] {
				quoted = append(quoted, strconv.Quote(v))
			}
			fmt.Fprintf(&b, "%q = [%s]\n", k, strings.Join(quoted, ", "))
		}
	}
	return b.String()
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
