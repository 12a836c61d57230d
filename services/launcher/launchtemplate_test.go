package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/tools/awsemu"
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

// The launcher remembers the templates it has seen for the ttl only: the names of configurations
// no longer launched (every AMI release makes new ones) do not pile up for the process's life.
func TestSeenTemplatesAreForgottenAfterTheTTL(t *testing.T) {
	emu, err := awsemu.New(awsemu.Config{})
	require.NoError(t, err)
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	api := ec2.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("x", "x", "")})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tpl := newTemplates(api, time.Minute, func() time.Time { return now })
	imgs, err := api.DescribeImages(context.Background(), &ec2.DescribeImagesInput{Owners: []string{"amazon"}})
	require.NoError(t, err)
	require.NotEmpty(t, imgs.Images)
	spec := templateSpec{ClusterName: "c", NodeClass: "n", ImageID: aws.ToString(imgs.Images[0].ImageId), Metadata: metadataOf(nil)}

	first, err := tpl.ensure(context.Background(), spec)
	require.NoError(t, err)
	for i := 0; i < 50; i++ {
		now = now.Add(2 * time.Minute)
		spec.UserData = fmt.Sprintf("release %d", i) // a new configuration each time
		_, err := tpl.ensure(context.Background(), spec)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, len(tpl.seen), "only the template seen within the ttl is remembered")
	_, kept := tpl.seen[first]
	assert.False(t, kept, "the first template is forgotten")
}

// Issue 31, item 3: launch templates of a configuration no longer used are deleted while their
// node class lives; one a live claim launched from stays. Two claims of one class whose labels
// differ (labels go into the user data) launch from two templates; once the first claim is
// gone its template is deleted, the second's is kept through later collections.
func TestUnusedLaunchTemplatesOfALiveClassAreDeleted(t *testing.T) {
	e := start(t, "--template-gc-interval", "200ms")
	first := e.claim("default-oldconf1", "t4g.small")
	e.publish(first, first.NodeClaimName)
	require.Eventually(t, func() bool { return len(e.instancesFor("default-oldconf1")) == 1 }, 60*time.Second, 100*time.Millisecond)
	second := e.claimLabelled("default", "default-newconf1", map[string]string{"team": "b"}, "t4g.small")
	e.publish(second, second.NodeClaimName)
	require.Eventually(t, func() bool { return len(e.instancesFor("default-newconf1")) == 1 }, 60*time.Second, 100*time.Millisecond)
	old, current := e.templateID("default-oldconf1"), e.templateID("default-newconf1")
	require.NotEqual(t, old, current, "another configuration, another template")

	api := ec2.NewFromConfig(e.awsConfig())
	exists := func(id string) bool {
		out, err := api.DescribeLaunchTemplates(e.ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{id}})
		return err == nil && len(out.LaunchTemplates) == 1
	}
	require.True(t, exists(old), "kept while its claim lives")
	require.NoError(t, e.kube.Delete(e.ctx, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-oldconf1"}}))
	require.Eventually(t, func() bool { return !exists(old) }, 30*time.Second, 100*time.Millisecond, "the template no claim uses is deleted, its class alive")
	describes := func() int {
		return e.countCalls(func(c awsemu.Call) bool { return c.Action == "DescribeLaunchTemplates" })
	}
	after := describes()
	require.Eventually(t, func() bool { return describes() >= after+4 }, 30*time.Second, 100*time.Millisecond, "more collections run")
	assert.True(t, exists(current), "the template a live claim launched from stays")
}
