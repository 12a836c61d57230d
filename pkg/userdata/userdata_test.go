package userdata

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func opts() Options {
	return Options{
		ClusterName: "demo-cluster", ClusterEndpoint: "https://127.0.0.1:6443", ClusterCA: []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"),
		ClusterDNS: "10.0.0.10", ClusterCIDR: "10.0.0.0/24",
		Labels:  map[string]string{"karpenter.sh/nodepool": "default", "a": "b", "karpenter.sh/capacity-type": "spot"},
		Taints:  []Taint{{Key: "t", Value: "v", Effect: "NoSchedule"}, {Key: "karpenter.sh/unregistered", Effect: "NoExecute"}},
		MaxPods: 29,
	}
}

func TestRenderParseRoundTripPerFamily(t *testing.T) {
	for _, fam := range []Family{AL2, AL2023, Bottlerocket} {
		t.Run(string(fam), func(t *testing.T) {
			doc, err := Render(fam, opts())
			require.NoError(t, err)
			reg, err := Parse(doc)
			require.NoError(t, err, doc)
			assert.Equal(t, "demo-cluster", reg.ClusterName)
			assert.Equal(t, opts().Labels, reg.Labels)
			assert.ElementsMatch(t, opts().Taints, reg.Taints)
			assert.Equal(t, 29, reg.MaxPods)
			// EC2 carries user data base64-encoded; Parse takes either.
			reg2, err := Parse(base64.StdEncoding.EncodeToString([]byte(doc)))
			require.NoError(t, err)
			assert.Equal(t, reg, reg2)
		})
	}
}

func TestAL2UsesBootstrapScript(t *testing.T) {
	doc, err := Render(AL2, opts())
	require.NoError(t, err)
	assert.Contains(t, doc, "/etc/eks/bootstrap.sh 'demo-cluster'")
	assert.Contains(t, doc, "--kubelet-extra-args '--node-labels=a=b,karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default --register-with-taints=t=v:NoSchedule,karpenter.sh/unregistered:NoExecute --max-pods=29'")
	assert.Contains(t, doc, "--use-max-pods false")
}

func TestAL2023WritesNodeConfig(t *testing.T) {
	doc, err := Render(AL2023, opts())
	require.NoError(t, err)
	parts, err := ParseMultipart(doc)
	require.NoError(t, err)
	require.Len(t, parts, 1)
	assert.Equal(t, "application/node.eks.aws", parts[0].ContentType)
	assert.Contains(t, parts[0].Body, "kind: NodeConfig")
	assert.Contains(t, parts[0].Body, "maxPods: 29")
	assert.Contains(t, parts[0].Body, "cidr: 10.0.0.0/24")
}

func TestCustomUserDataIsMergedNotReplaced(t *testing.T) {
	o := opts()
	o.Custom = "#!/bin/bash\necho custom-setup\n"
	doc, err := Render(AL2, o)
	require.NoError(t, err)
	parts, err := ParseMultipart(doc)
	require.NoError(t, err)
	require.Len(t, parts, 2)
	assert.Contains(t, parts[0].Body, "echo custom-setup", "the class's script runs before bootstrap")
	assert.Contains(t, parts[1].Body, "/etc/eks/bootstrap.sh")

	// A class's own NodeConfig comes after ours, so its settings win where they overlap.
	o.Custom = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n    - --node-labels=team=infra\n--BOUNDARY--\n"
	doc, err = Render(AL2023, o)
	require.NoError(t, err)
	reg, err := Parse(doc)
	require.NoError(t, err)
	assert.Equal(t, "infra", reg.Labels["team"])
	assert.Equal(t, "default", reg.Labels["karpenter.sh/nodepool"])
}

func TestBadInputGetsClearErrors(t *testing.T) {
	_, err := Render("Windows2022", opts())
	assert.ErrorContains(t, err, `unsupported AMI family "Windows2022"`)
	_, err = Render(AL2, Options{})
	assert.ErrorContains(t, err, "cluster name is required")
	o := opts()
	o.Custom = "MIME-Version: 1.0\nContent-Type: text/plain\n\nhello"
	_, err = Render(AL2, o)
	assert.ErrorContains(t, err, "not multipart")
	_, err = Parse("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x")
	assert.Error(t, err)
}

// Parse reads user data that arrives from outside (launch templates); it must never panic.
func FuzzParse(f *testing.F) {
	for _, fam := range []Family{AL2, AL2023, Bottlerocket} {
		doc, _ := Render(fam, opts())
		f.Add(doc)
	}
	f.Add("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\n")
	f.Fuzz(func(t *testing.T, doc string) {
		_, _ = Parse(doc)
	})
}

func TestParseReadsRegisterWithTaintsAndRejectsUnknownEffects(t *testing.T) {
	doc := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: c\n  kubelet:\n    config:\n      registerWithTaints:\n      - key: karpenter.sh/unregistered\n        effect: NoExecute\n"
	reg, err := Parse(doc)
	require.NoError(t, err)
	assert.Equal(t, []Taint{{Key: "karpenter.sh/unregistered", Effect: "NoExecute"}}, reg.Taints)

	_, err = Parse("/etc/eks/bootstrap.sh c --kubelet-extra-args '--register-with-taints=t=v:Sometimes'")
	assert.ErrorContains(t, err, `unknown effect "Sometimes"`)
	_, err = Parse("[settings.kubernetes.node-taints]\n\"t\" = [\"v:Never\"]\n")
	assert.ErrorContains(t, err, `unknown effect "Never"`)
}
