package awsemu

import (
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetwright/fleetwright/pkg/userdata"
)

// The node labels and taints a launch template's user data asks the kubelet for are read by
// pkg/userdata, the same package the launcher writes them with, in the three forms EKS
// images understand: AL2 bootstrap.sh kubelet flags, AL2023 nodeadm NodeConfig (kubelet flags
// and registerWithTaints, usually inside MIME multipart), and Bottlerocket TOML.

// kubeletSettings is what user data asks of the kubelet.
type kubeletSettings struct {
	Labels map[string]string
	Taints []corev1.Taint
}

// decodeUserData undoes the base64 of LaunchTemplateData.UserData.
func decodeUserData(b64 string) (string, error) {
	if b64 == "" {
		return "", nil
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("decoding user data: %w", err)
	}
	return string(raw), nil
}

// parseKubeletSettings reads labels and taints from decoded user data.
func parseKubeletSettings(doc string) (kubeletSettings, error) {
	reg, err := userdata.Parse(doc)
	if err != nil {
		return kubeletSettings{Labels: map[string]string{}}, fmt.Errorf("reading user data: %w", err)
	}
	s := kubeletSettings{Labels: reg.Labels}
	for _, t := range reg.Taints {
		s.Taints = append(s.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return s, nil
}
