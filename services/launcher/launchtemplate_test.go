package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every launch setting of a class is part of its template's name, so changing one makes a new
// template instead of launching with the old settings.
func TestTemplateNameCoversEveryLaunchSetting(t *testing.T) {
	base := templateSpec{ClusterName: "c", NodeClass: "n", ImageID: "ami-1", SecurityGroupIDs: []string{"sg-1"}, UserData: "u",
		InstanceProfile: "p", Tags: map[string]string{"k": "v"}, Metadata: metadataOf(nil)}
	yes, no := true, false
	changes := map[string]func(*templateSpec){
		"instance profile": func(s *templateSpec) { s.InstanceProfile = "q" },
		"hop limit":        func(s *templateSpec) { s.Metadata.HopLimit = 2 },
		"tokens":           func(s *templateSpec) { s.Metadata.Tokens = "optional" },
		"endpoint":         func(s *templateSpec) { s.Metadata.Endpoint = "disabled" },
		"ipv6":             func(s *templateSpec) { s.Metadata.IPv6 = "enabled" },
		"public ip on":     func(s *templateSpec) { s.PublicIP = &yes },
		"public ip off":    func(s *templateSpec) { s.PublicIP = &no },
		"monitoring":       func(s *templateSpec) { s.Monitoring = true },
	}
	seen := map[string]string{base.name(): "base"}
	for what, change := range changes {
		s := base
		change(&s)
		name := s.name()
		assert.NotContains(t, seen, name, "%s changes the name (same as %s)", what, seen[name])
		seen[name] = what
	}
	assert.Equal(t, metadataOptions{Endpoint: "enabled", IPv6: "disabled", HopLimit: 1, Tokens: "required"}, metadataOf(nil), "the CRD's defaults")
}
