package deploytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// statement is one IAM policy statement, with Action and Resource normalised to lists.
type statement struct {
	Sid       string
	Effect    string
	Actions   []string
	Resources []string
	Condition map[string]map[string]any
}

func (s *statement) UnmarshalJSON(b []byte) error {
	var raw struct {
		Sid       string
		Effect    string
		Action    any
		Resource  any
		Condition map[string]map[string]any
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	s.Sid, s.Effect, s.Condition = raw.Sid, raw.Effect, raw.Condition
	s.Actions, s.Resources = strings1(raw.Action), strings1(raw.Resource)
	return nil
}

func strings1(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, e.(string))
		}
		return out
	}
	return nil
}

type template struct {
	Resources map[string]struct {
		Type       string         `yaml:"Type"`
		Properties map[string]any `yaml:"Properties"`
	} `yaml:"Resources"`
}

// policyStatements decodes a Fn::Sub'ed policy document; the ${...} references are kept
// verbatim so resources and condition keys can be checked as written.
func policyStatements(t *testing.T, doc any) []statement {
	t.Helper()
	m, ok := doc.(map[string]any)
	require.True(t, ok, "policy document is a Fn::Sub string")
	text, ok := m["Fn::Sub"].(string)
	if list, isList := m["Fn::Sub"].([]any); isList && len(list) == 2 {
		text, ok = list[0].(string) // Fn::Sub [text, variables]
	}
	require.True(t, ok, "policy document is a Fn::Sub string")
	var pd struct {
		Version   string
		Statement []statement
	}
	require.NoError(t, json.Unmarshal([]byte(text), &pd), "policy document is JSON")
	require.Equal(t, "2012-10-17", pd.Version)
	return pd.Statement
}

func loadTemplate(t *testing.T) template {
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "aws", "fleetwright.yaml"))
	require.NoError(t, err)
	var tpl template
	require.NoError(t, yaml.Unmarshal(b, &tpl))
	return tpl
}

// rolePolicy returns the statements of a role's one inline policy, after checking its trust:
// IRSA (when the stack has an OIDC provider) and EKS Pod Identity, each for the role's own
// ServiceAccount only.
func rolePolicy(t *testing.T, tpl template, logical string) []statement {
	r, ok := tpl.Resources[logical]
	require.True(t, ok, "template has %s", logical)
	require.Equal(t, "AWS::IAM::Role", r.Type)
	sa := strings.ToLower(strings.TrimSuffix(logical, "Role"))
	branches := r.Properties["AssumeRolePolicyDocument"].(map[string]any)["Fn::If"].([]any)
	require.Equal(t, "UseIRSA", branches[0])
	withIRSA, podIdentityOnly := policyStatements(t, branches[1]), policyStatements(t, branches[2])
	require.Len(t, withIRSA, 2)
	require.Len(t, podIdentityOnly, 1)
	for _, s := range append(withIRSA, podIdentityOnly...) {
		switch s.Sid {
		case "IRSA":
			require.Equal(t, []string{"sts:AssumeRoleWithWebIdentity"}, s.Actions)
			require.Equal(t, "system:serviceaccount:${Namespace}:"+sa, s.Condition["StringEquals"]["${OIDCProvider}:sub"], "%s: its ServiceAccount only", logical)
		case "EKSPodIdentity":
			require.Equal(t, []string{"sts:AssumeRole", "sts:TagSession"}, s.Actions)
			require.Equal(t, sa, s.Condition["StringEquals"]["aws:RequestTag/kubernetes-service-account"], "%s: its ServiceAccount only", logical)
			require.Equal(t, "${Namespace}", s.Condition["StringEquals"]["aws:RequestTag/kubernetes-namespace"])
			require.Equal(t, "arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:cluster/${ClusterName}", s.Condition["ArnEquals"]["aws:SourceArn"], "%s: this cluster's pods only", logical)
		default:
			t.Fatalf("%s: unexpected trust statement %q", logical, s.Sid)
		}
	}
	policies := r.Properties["Policies"].([]any)
	require.Len(t, policies, 1)
	return policyStatements(t, policies[0].(map[string]any)["PolicyDocument"])
}

func actions(sts []statement) []string {
	set := map[string]bool{}
	for _, s := range sts {
		for _, a := range s.Actions {
			set[a] = true
		}
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// TestIAMPolicies checks each service's policy names the actions it needs and no more:
// nothing wildcarded, PassRole of the node role only, instance profiles made, filled and
// deleted only when tagged for this cluster, fleets launched only from this cluster's launch
// templates, TerminateInstances only on instances tagged for this cluster and a node pool, SQS on the interruption queue only, and no role at all for the
// services that do not call AWS.
func TestIAMPolicies(t *testing.T) {
	tpl := loadTemplate(t)
	launcher := rolePolicy(t, tpl, "LauncherRole")
	terminator := rolePolicy(t, tpl, "TerminatorRole")

	require.Subset(t, actions(launcher), []string{"ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:DescribeLaunchTemplates",
		"ec2:DeleteLaunchTemplate", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeImages",
		"ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeSpotPriceHistory", "ec2:DescribeInstances",
		"ec2:CreateTags", "iam:PassRole", "iam:GetInstanceProfile", "iam:ListInstanceProfiles", "iam:CreateInstanceProfile",
		"iam:TagInstanceProfile", "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile", "ssm:GetParameter",
		"eks:DescribeCluster", "pricing:GetProducts"})
	require.NotContains(t, actions(launcher), "ec2:TerminateInstances", "the launcher launches; the terminator terminates")
	require.ElementsMatch(t, []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:GetQueueAttributes",
		"ec2:DescribeInstances", "ec2:TerminateInstances"}, actions(terminator))

	for name, sts := range map[string][]statement{"launcher": launcher, "terminator": terminator} {
		for _, s := range sts {
			require.Equal(t, "Allow", s.Effect)
			for _, a := range s.Actions {
				require.NotContains(t, a, "*", "%s: wildcard action %s", name, a)
			}
			if s.Actions[0] == "iam:PassRole" {
				require.Equal(t, []string{"arn:${AWS::Partition}:iam::${AWS::AccountId}:role/${NodeRoleName}"}, s.Resources, "PassRole of the node role only")
			}
			if contains(s.Actions, "iam:CreateInstanceProfile") {
				require.Equal(t, "owned", s.Condition["StringEquals"]["aws:RequestTag/kubernetes.io/cluster/${ClusterName}"],
					"%s makes only instance profiles tagged for this cluster", name)
			}
			for _, a := range []string{"iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"} {
				if contains(s.Actions, a) {
					require.Equal(t, "owned", s.Condition["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/${ClusterName}"],
						"%s changes only instance profiles tagged for this cluster", name)
				}
			}
			if contains(s.Actions, "ec2:CreateTags") && s.Condition["StringEquals"]["ec2:CreateAction"] == nil {
				// Tagging after launch: only Karpenter v0.2x instances of this cluster, with their
				// adopted claim and pool (services/launcher/legacy.go).
				require.Equal(t, []string{"arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:instance/*"}, s.Resources, "%s: %s", name, s.Sid)
				require.Equal(t, "owned", s.Condition["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/${ClusterName}"], "%s: %s", name, s.Sid)
				require.Equal(t, "false", s.Condition["Null"]["aws:ResourceTag/karpenter.sh/provisioner-name"], "%s: %s", name, s.Sid)
				require.ElementsMatch(t, []any{"karpenter.sh/nodeclaim", "karpenter.sh/nodepool"}, s.Condition["ForAllValues:StringEquals"]["aws:TagKeys"],
					"%s: %s adds only the adopted claim's tags", name, s.Sid)
			}
			if contains(s.Actions, "ec2:TerminateInstances") {
				require.Equal(t, "owned", s.Condition["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/${ClusterName}"],
					"%s terminates only instances tagged for this cluster", name)
				require.Equal(t, "false", s.Condition["Null"]["aws:ResourceTag/karpenter.sh/nodepool"],
					"%s terminates only instances tagged karpenter.sh/nodepool too: a managed node group's carry the cluster tag", name)
			}
			if (contains(s.Actions, "ec2:CreateFleet") || contains(s.Actions, "ec2:RunInstances")) && containsPrefix(s.Resources, launchTemplateARN) {
				require.Equal(t, []string{launchTemplateARN + "*"}, s.Resources,
					"%s: %s grants launch templates in a statement of their own, conditioned on the template's tags", name, s.Sid)
				require.Equal(t, "owned", s.Condition["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/${ClusterName}"],
					"%s launches only from this cluster's launch templates", name)
				require.Equal(t, "false", s.Condition["Null"]["aws:ResourceTag/karpenter.sh/nodepool"],
					"%s launches only from launch templates of a node pool", name)
			}
			if contains(s.Actions, "ssm:GetParameter") {
				require.Equal(t, []string{"arn:${AWS::Partition}:ssm:${AWS::Region}::parameter/aws/service/*",
					"arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/${AMIParameterPath}"}, s.Resources,
					"%s reads AWS's public AMI parameters and the account's under AMIParameterPath only", name)
			}
			if contains(s.Actions, "eks:DescribeCluster") {
				require.Equal(t, []string{"arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:cluster/${ClusterName}"}, s.Resources,
					"%s describes this cluster only (its service CIDR)", name)
			}
			if strings.HasPrefix(s.Actions[0], "sqs:") {
				require.Equal(t, []string{"${InterruptionQueueArn}"}, s.Resources, "its queue only (TestQueueNameBesideKarpenter resolves it)")
			}
			for _, r := range s.Resources {
				if r == "*" {
					for _, a := range s.Actions {
						// pricing:GetProducts has no resource-level permissions: "*" is its only resource.
						require.True(t, strings.HasPrefix(a, "ec2:Describe") || a == "pricing:GetProducts", "%s: %s on every resource", name, a)
					}
				}
			}
		}
	}
	for logical, r := range tpl.Resources {
		if r.Type == "AWS::IAM::Role" {
			require.Contains(t, []string{"LauncherRole", "TerminatorRole"}, logical, "scheduler and pod-watcher call no AWS API")
		}
	}
}

const launchTemplateARN = "arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:launch-template/"

func containsPrefix(list []string, prefix string) bool {
	for _, e := range list {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// TestInterruptionQueueAndRules: the queue and the four EventBridge rules that feed it.
func TestInterruptionQueueAndRules(t *testing.T) {
	tpl := loadTemplate(t)
	require.Equal(t, "AWS::SQS::Queue", tpl.Resources["InterruptionQueue"].Type)
	var detailTypes []string
	for _, r := range tpl.Resources {
		if r.Type != "AWS::Events::Rule" {
			continue
		}
		pattern := r.Properties["EventPattern"].(map[string]any)
		for _, d := range pattern["detail-type"].([]any) {
			detailTypes = append(detailTypes, d.(string))
		}
		targets := r.Properties["Targets"].([]any)
		require.Len(t, targets, 1)
		arn := targets[0].(map[string]any)["Arn"].(map[string]any)["Fn::GetAtt"].([]any)
		require.Equal(t, "InterruptionQueue", arn[0])
	}
	require.ElementsMatch(t, []string{"AWS Health Event", "EC2 Spot Instance Interruption Warning",
		"EC2 Instance Rebalance Recommendation", "EC2 Instance State-change Notification"}, detailTypes)
}
