package translate

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/ec2/v1alpha1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
)

var discovery = map[string]string{"karpenter.sh/discovery": "demo-cluster"}

// template is the getting-started AWSNodeTemplate (deploy/examples/v1alpha5/default.yaml),
// changed by opts.
func template(opts ...func(*v1alpha1.AWSNodeTemplateSpec)) *v1alpha1.AWSNodeTemplate {
	t := &v1alpha1.AWSNodeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.AWSNodeTemplateSpec{AWS: v1alpha1.AWS{
			SubnetSelector:        map[string]string{"karpenter.sh/discovery": "demo-cluster"},
			SecurityGroupSelector: map[string]string{"karpenter.sh/discovery": "demo-cluster"},
		}},
	}
	for _, o := range opts {
		o(&t.Spec)
	}
	return t
}

var defaultOpts = Options{DefaultInstanceProfile: "KarpenterNodeInstanceProfile-demo"}

func TestEC2NodeClass(t *testing.T) {
	cases := []struct {
		name  string
		in    *v1alpha1.AWSNodeTemplate
		opts  Options
		check func(t *testing.T, nc *ec2v1.EC2NodeClass)
	}{
		{"getting started", template(), defaultOpts, func(t *testing.T, nc *ec2v1.EC2NodeClass) {
			require.Equal(t, "default", nc.Name)
			require.Equal(t, "karpenter.k8s.aws/v1", nc.APIVersion)
			require.Equal(t, "EC2NodeClass", nc.Kind)
			require.Equal(t, []ec2v1.SubnetSelectorTerm{{Tags: discovery}}, nc.Spec.SubnetSelectorTerms)
			require.Equal(t, []ec2v1.SecurityGroupSelectorTerm{{Tags: discovery}}, nc.Spec.SecurityGroupSelectorTerms)
			require.Equal(t, "AL2", *nc.Spec.AMIFamily, "v1alpha5 defaulted to AL2")
			require.Equal(t, []ec2v1.AMISelectorTerm{{Alias: "al2@latest"}}, nc.Spec.AMISelectorTerms)
			require.Equal(t, "KarpenterNodeInstanceProfile-demo", *nc.Spec.InstanceProfile)
			require.Empty(t, nc.Spec.Role)
			require.Equal(t, int64(2), *nc.Spec.MetadataOptions.HTTPPutResponseHopLimit, "v1alpha5's hop limit")
			require.Equal(t, "required", *nc.Spec.MetadataOptions.HTTPTokens)
			require.Nil(t, nc.Spec.Kubelet)
		}},
		{"ids", template(func(s *v1alpha1.AWSNodeTemplateSpec) {
			s.SubnetSelector = map[string]string{"aws-ids": "subnet-1, subnet-2,subnet-1"}
			s.SecurityGroupSelector = map[string]string{"aws-ids": "sg-1"}
			s.AMISelector = map[string]string{"aws::ids": "ami-1,ami-2"}
		}), defaultOpts, func(t *testing.T, nc *ec2v1.EC2NodeClass) {
			require.Equal(t, []ec2v1.SubnetSelectorTerm{{ID: "subnet-1"}, {ID: "subnet-2"}}, nc.Spec.SubnetSelectorTerms)
			require.Equal(t, []ec2v1.SecurityGroupSelectorTerm{{ID: "sg-1"}}, nc.Spec.SecurityGroupSelectorTerms)
			require.Equal(t, []ec2v1.AMISelectorTerm{{ID: "ami-1"}, {ID: "ami-2"}}, nc.Spec.AMISelectorTerms)
			require.Equal(t, "AL2", *nc.Spec.AMIFamily)
		}},
		{"ami name, owners and tags", template(func(s *v1alpha1.AWSNodeTemplateSpec) {
			s.AMIFamily = ptrTo("Bottlerocket")
			s.AMISelector = map[string]string{"aws::name": "my-ami-*", "aws::owners": "self,123456789012", "team": "a"}
		}), defaultOpts, func(t *testing.T, nc *ec2v1.EC2NodeClass) {
			require.Equal(t, []ec2v1.AMISelectorTerm{
				{Name: "my-ami-*", Owner: "self", Tags: map[string]string{"team": "a"}},
				{Name: "my-ami-*", Owner: "123456789012", Tags: map[string]string{"team": "a"}},
			}, nc.Spec.AMISelectorTerms)
			require.Equal(t, "Bottlerocket", *nc.Spec.AMIFamily)
		}},
		{"owners alone match any name", template(func(s *v1alpha1.AWSNodeTemplateSpec) {
			s.AMISelector = map[string]string{"aws::owners": "amazon"}
		}), defaultOpts, func(t *testing.T, nc *ec2v1.EC2NodeClass) {
			require.Equal(t, []ec2v1.AMISelectorTerm{{Name: "*", Owner: "amazon"}}, nc.Spec.AMISelectorTerms)
		}},
		{"family alias", template(func(s *v1alpha1.AWSNodeTemplateSpec) { s.AMIFamily = ptrTo("AL2023") }), defaultOpts,
			func(t *testing.T, nc *ec2v1.EC2NodeClass) {
				require.Equal(t, []ec2v1.AMISelectorTerm{{Alias: "al2023@latest"}}, nc.Spec.AMISelectorTerms)
				require.Equal(t, "AL2023", nc.ResolvedAMIFamily())
			}},
		{"ubuntu with a selector bootstraps as AL2", template(func(s *v1alpha1.AWSNodeTemplateSpec) {
			s.AMIFamily = ptrTo("Ubuntu")
			s.AMISelector = map[string]string{"aws::name": "ubuntu-eks/*"}
		}), defaultOpts, func(t *testing.T, nc *ec2v1.EC2NodeClass) {
			require.Equal(t, "AL2", *nc.Spec.AMIFamily)
		}},
		{"template's own settings", template(func(s *v1alpha1.AWSNodeTemplateSpec) {
			s.InstanceProfile = ptrTo("own-profile")
			s.UserData = ptrTo("#!/bin/bash\necho hi")
			s.Tags = map[string]string{"team": "a"}
			s.DetailedMonitoring = ptrTo(true)
			s.MetadataOptions = &v1alpha1.MetadataOptions{HTTPPutResponseHopLimit: ptrTo[int64](1)}
			q := resource.MustParse("100Gi")
			s.BlockDeviceMappings = []*v1alpha1.BlockDeviceMapping{{DeviceName: ptrTo("/dev/xvda"), EBS: &v1alpha1.BlockDevice{VolumeSize: &q, VolumeType: ptrTo("gp3")}}}
		}), Options{DefaultInstanceProfile: "default-profile", Kubelet: &ec2v1.KubeletConfiguration{MaxPods: ptrTo[int32](30)}},
			func(t *testing.T, nc *ec2v1.EC2NodeClass) {
				require.Equal(t, "own-profile", *nc.Spec.InstanceProfile)
				require.Equal(t, "#!/bin/bash\necho hi", *nc.Spec.UserData)
				require.Equal(t, map[string]string{"team": "a"}, nc.Spec.Tags)
				require.True(t, *nc.Spec.DetailedMonitoring)
				require.Equal(t, int64(1), *nc.Spec.MetadataOptions.HTTPPutResponseHopLimit)
				require.Equal(t, "enabled", *nc.Spec.MetadataOptions.HTTPEndpoint)
				require.Len(t, nc.Spec.BlockDeviceMappings, 1)
				require.Equal(t, "/dev/xvda", *nc.Spec.BlockDeviceMappings[0].DeviceName)
				require.Equal(t, "100Gi", nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize.String())
				require.Equal(t, "gp3", *nc.Spec.BlockDeviceMappings[0].EBS.VolumeType)
				require.Equal(t, int32(30), *nc.Spec.Kubelet.MaxPods)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := EC2NodeClass(tc.in, tc.opts)
			require.NoError(t, err)
			tc.check(t, nc)
		})
	}
}

func TestEC2NodeClassErrors(t *testing.T) {
	cases := []struct {
		name string
		in   *v1alpha1.AWSNodeTemplate
		opts Options
		want string
	}{
		{"no instance profile", template(), Options{}, "no instanceProfile"},
		{"no subnets", template(func(s *v1alpha1.AWSNodeTemplateSpec) { s.SubnetSelector = nil }), defaultOpts, "subnetSelector is empty"},
		{"no security groups", template(func(s *v1alpha1.AWSNodeTemplateSpec) { s.SecurityGroupSelector = nil }), defaultOpts, "securityGroupSelector is empty"},
		{"custom without selector", template(func(s *v1alpha1.AWSNodeTemplateSpec) { s.AMIFamily = ptrTo("Custom") }), defaultOpts, "amiFamily Custom needs an amiSelector"},
		{"own launch template", template(func(s *v1alpha1.AWSNodeTemplateSpec) { s.LaunchTemplateName = ptrTo("mine") }), defaultOpts, "launchTemplate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EC2NodeClass(tc.in, tc.opts)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "translating awsnodetemplate default")
		})
	}
}

func TestProviderNodeTemplate(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		want    v1alpha1.AWSNodeTemplateSpec
		wantErr string
	}{
		{"inline provider", `{"apiVersion":"extensions.karpenter.sh/v1alpha1","kind":"AWS","subnetSelector":{"a":"b"},"securityGroupSelector":{"c":"d"},"instanceProfile":"p","amiFamily":"Bottlerocket"}`,
			v1alpha1.AWSNodeTemplateSpec{AWS: v1alpha1.AWS{
				SubnetSelector: map[string]string{"a": "b"}, SecurityGroupSelector: map[string]string{"c": "d"},
				InstanceProfile: ptrTo("p"), AMIFamily: ptrTo("Bottlerocket"),
			}}, ""},
		{"misspelt field", `{"subnetSelectr":{"a":"b"}}`, v1alpha1.AWSNodeTemplateSpec{}, `unknown field "subnetSelectr"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha5.Provisioner{ObjectMeta: metav1.ObjectMeta{Name: "inline"},
				Spec: v1alpha5.ProvisionerSpec{Provider: &runtime.RawExtension{Raw: []byte(tc.raw)}}}
			got, err := ProviderNodeTemplate(p)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "inline", got.Name)
			require.Equal(t, tc.want, got.Spec)
			nc, err := EC2NodeClass(got, Options{})
			require.NoError(t, err)
			require.Equal(t, "inline", nc.Name)
			require.Equal(t, []ec2v1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}, nc.Spec.AMISelectorTerms)
		})
	}
}
