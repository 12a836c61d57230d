package v1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func hashClass() *EC2NodeClass {
	str := func(s string) *string { return &s }
	tags := map[string]string{}
	for _, k := range []string{"team", "env", "app", "owner"} {
		tags[k] = k + "-value"
	}
	return &EC2NodeClass{Spec: EC2NodeClassSpec{
		SubnetSelectorTerms:        []SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
		SecurityGroupSelectorTerms: []SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
		AMISelectorTerms:           []AMISelectorTerm{{Alias: "al2023@latest"}},
		Role:                       "KarpenterNodeRole-demo",
		Tags:                       tags,
		UserData:                   str("#!/bin/bash\necho hi\n"),
		BlockDeviceMappings: []*BlockDeviceMapping{
			{DeviceName: str("/dev/xvda"), RootVolume: true},
			{DeviceName: str("/dev/xvdb")},
		},
	}}
}

func TestEC2NodeClassHashStable(t *testing.T) {
	a := hashClass()
	require.NotEmpty(t, a.Hash())
	b := hashClass()
	b.Spec.Tags = map[string]string{}
	for _, k := range []string{"owner", "app", "env", "team"} {
		b.Spec.Tags[k] = k + "-value"
	}
	b.Spec.BlockDeviceMappings[0], b.Spec.BlockDeviceMappings[1] = b.Spec.BlockDeviceMappings[1], b.Spec.BlockDeviceMappings[0]
	for range 20 {
		assert.Equal(t, a.Hash(), b.Hash())
	}
	// Writing out the family the alias implies is no change (Karpenter hashes the resolved one).
	family := AMIFamilyAL2023
	b.Spec.AMIFamily = &family
	assert.Equal(t, a.Hash(), b.Hash())
	// An explicit false is an unset field.
	no := false
	b.Spec.DetailedMonitoring = &no
	assert.Equal(t, a.Hash(), b.Hash())
}

func TestEC2NodeClassHashFields(t *testing.T) {
	str := func(s string) *string { return &s }
	base := hashClass().Hash()
	changed := map[string]func(*EC2NodeClass){
		"role":             func(c *EC2NodeClass) { c.Spec.Role = "other" },
		"instance profile": func(c *EC2NodeClass) { c.Spec.InstanceProfile = str("profile") },
		"tags":             func(c *EC2NodeClass) { c.Spec.Tags["team"] = "b" },
		"user data":        func(c *EC2NodeClass) { c.Spec.UserData = str("#!/bin/bash\n") },
		"block devices":    func(c *EC2NodeClass) { c.Spec.BlockDeviceMappings[1].DeviceName = str("/dev/xvdc") },
		"kubelet":          func(c *EC2NodeClass) { m := int32(20); c.Spec.Kubelet = &KubeletConfiguration{MaxPods: &m} },
		"monitoring":       func(c *EC2NodeClass) { yes := true; c.Spec.DetailedMonitoring = &yes },
		"metadata options": func(c *EC2NodeClass) { c.Spec.MetadataOptions = &MetadataOptions{HTTPTokens: str("optional")} },
		"resolved family":  func(c *EC2NodeClass) { c.Spec.AMISelectorTerms = []AMISelectorTerm{{Alias: "bottlerocket@latest"}} },
		"instance store":   func(c *EC2NodeClass) { c.Spec.InstanceStorePolicy = str("RAID0") },
		"context":          func(c *EC2NodeClass) { c.Spec.Context = str("ctx") },
	}
	for name, mutate := range changed {
		c := hashClass()
		mutate(c)
		assert.NotEqual(t, base, c.Hash(), "changing the %s changes the hash", name)
	}
	same := map[string]func(*EC2NodeClass){
		"subnet selector terms": func(c *EC2NodeClass) { c.Spec.SubnetSelectorTerms = []SubnetSelectorTerm{{ID: "subnet-1"}} },
		"security group selector terms": func(c *EC2NodeClass) {
			c.Spec.SecurityGroupSelectorTerms = []SecurityGroupSelectorTerm{{Name: "nodes"}}
		},
		"AMI selector terms (same family)": func(c *EC2NodeClass) { c.Spec.AMISelectorTerms = []AMISelectorTerm{{Alias: "al2023@v20240807"}} },
		"status": func(c *EC2NodeClass) {
			c.Status.AMIs = []AMI{{ID: "ami-1"}}
			c.Status.Subnets = []Subnet{{ID: "subnet-1"}}
		},
		"metadata": func(c *EC2NodeClass) {
			c.Annotations = map[string]string{AnnotationEC2NodeClassHash: "1"}
		},
	}
	for name, mutate := range same {
		c := hashClass()
		mutate(c)
		assert.Equal(t, base, c.Hash(), "changing the %s leaves the hash", name)
	}
}
