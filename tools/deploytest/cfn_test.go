package deploytest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// cfnStack is deploy/aws/fleetwright.yaml as CloudFormation would resolve it for one set of
// parameters: every intrinsic function the template uses (Ref, Fn::Sub, Fn::If, Fn::Equals,
// Fn::Not, Fn::GetAtt) evaluated, conditions applied, resources whose condition is false left out.
type cfnStack struct {
	params     map[string]string
	conditions map[string]bool
	resources  map[string]map[string]any // logical id → the resource, resolved
	outputs    map[string]any
	raw        map[string]any
}

const (
	cfnAccount = "111122223333"
	cfnRegion  = "eu-west-1"
)

// resolveStack reads the template and resolves it with the given parameters (defaults for the rest).
func resolveStack(t *testing.T, params map[string]string) *cfnStack {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "aws", "fleetwright.yaml"))
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, yaml.Unmarshal(b, &raw))
	s := &cfnStack{params: map[string]string{}, conditions: map[string]bool{}, resources: map[string]map[string]any{}, raw: raw}
	for name, p := range raw["Parameters"].(map[string]any) {
		def, hasDef := p.(map[string]any)["Default"]
		v, given := params[name]
		if !given {
			require.True(t, hasDef, "parameter %s has no default and was not given", name)
			v = fmt.Sprint(def)
		}
		if pattern, ok := p.(map[string]any)["AllowedPattern"].(string); ok {
			require.Regexp(t, regexp.MustCompile(pattern), v, "parameter %s=%q breaks its AllowedPattern", name, v)
		}
		s.params[name] = v
	}
	for name := range params {
		require.Contains(t, s.params, name, "the template has no parameter %s", name)
	}
	conds, _ := raw["Conditions"].(map[string]any)
	for name, c := range conds {
		s.conditions[name] = s.eval(t, c).(bool)
	}
	for id, r := range raw["Resources"].(map[string]any) {
		rm := r.(map[string]any)
		if c, ok := rm["Condition"].(string); ok && !s.conditions[c] {
			continue
		}
		s.resources[id] = s.eval(t, rm).(map[string]any)
	}
	outs, _ := raw["Outputs"].(map[string]any)
	s.outputs = map[string]any{}
	for id, o := range outs {
		om := o.(map[string]any)
		if c, ok := om["Condition"].(string); ok && !s.conditions[c] {
			continue
		}
		s.outputs[id] = s.eval(t, om["Value"])
	}
	return s
}

// noValue is AWS::NoValue: the property or list element is left out.
type noValue struct{}

func (s *cfnStack) eval(t *testing.T, v any) any {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if r, ok := s.intrinsic(t, k, arg); ok {
					return r
				}
			}
		}
		out := map[string]any{}
		for k, e := range x {
			if r := s.eval(t, e); r != (noValue{}) {
				out[k] = r
			}
		}
		return out
	case []any:
		out := []any{}
		for _, e := range x {
			if r := s.eval(t, e); r != (noValue{}) {
				out = append(out, r)
			}
		}
		return out
	default:
		return v
	}
}

func (s *cfnStack) intrinsic(t *testing.T, fn string, arg any) (any, bool) {
	t.Helper()
	switch fn {
	case "Ref":
		name := arg.(string)
		switch name {
		case "AWS::Partition":
			return "aws", true
		case "AWS::Region":
			return cfnRegion, true
		case "AWS::AccountId":
			return cfnAccount, true
		case "AWS::NoValue":
			return noValue{}, true
		}
		if v, ok := s.params[name]; ok {
			return v, true
		}
		return s.attr(t, name, "Ref"), true
	case "Fn::Sub":
		text, vars := "", map[string]any{}
		switch a := arg.(type) {
		case string:
			text = a
		case []any:
			text = a[0].(string)
			for k, e := range a[1].(map[string]any) {
				vars[k] = s.eval(t, e)
			}
		}
		return regexp.MustCompile(`\$\{([^}!]+)\}`).ReplaceAllStringFunc(text, func(m string) string {
			name := m[2 : len(m)-1]
			if v, ok := vars[name]; ok {
				return fmt.Sprint(v)
			}
			if res, attr, ok := strings.Cut(name, "."); ok {
				return fmt.Sprint(s.attr(t, res, attr))
			}
			return fmt.Sprint(s.eval(t, map[string]any{"Ref": name}))
		}), true
	case "Fn::If":
		a := arg.([]any)
		if s.conditions[a[0].(string)] {
			return s.eval(t, a[1]), true
		}
		return s.eval(t, a[2]), true
	case "Fn::Equals":
		a := arg.([]any)
		return fmt.Sprint(s.eval(t, a[0])) == fmt.Sprint(s.eval(t, a[1])), true
	case "Fn::Not":
		return !s.eval(t, arg.([]any)[0]).(bool), true
	case "Fn::GetAtt":
		a := arg.([]any)
		return s.attr(t, a[0].(string), a[1].(string)), true
	}
	return nil, false
}

// attr is a resource's Ref or attribute, as CloudFormation would give it for the attributes the
// template reads.
func (s *cfnStack) attr(t *testing.T, id, attr string) any {
	t.Helper()
	raw, ok := s.raw["Resources"].(map[string]any)[id].(map[string]any)
	require.True(t, ok, "no resource %s", id)
	props := raw["Properties"].(map[string]any)
	switch raw["Type"] {
	case "AWS::SQS::Queue":
		name := fmt.Sprint(s.eval(t, props["QueueName"]))
		switch attr {
		case "QueueName":
			return name
		case "Arn":
			return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", cfnRegion, cfnAccount, name)
		case "Ref":
			return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", cfnRegion, cfnAccount, name)
		}
	case "AWS::IAM::Role":
		name := fmt.Sprint(s.eval(t, props["RoleName"]))
		if attr == "Arn" {
			return fmt.Sprintf("arn:aws:iam::%s:role/%s", cfnAccount, name)
		}
		return name
	}
	t.Fatalf("the test does not know %s of %s (%v)", attr, id, raw["Type"])
	return nil
}

// policy is a resolved policy document's statements.
func (s *cfnStack) policy(t *testing.T, doc any) []statement {
	t.Helper()
	if text, ok := doc.(string); ok {
		var pd struct{ Statement []statement }
		require.NoError(t, json.Unmarshal([]byte(text), &pd), "the policy is JSON once resolved")
		return pd.Statement
	}
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	var pd struct{ Statement []statement }
	require.NoError(t, json.Unmarshal(b, &pd))
	return pd.Statement
}

// rolePolicies are a role's inline policies' statements, resolved.
func (s *cfnStack) rolePolicies(t *testing.T, id string) []statement {
	t.Helper()
	var out []statement
	for _, p := range s.resources[id]["Properties"].(map[string]any)["Policies"].([]any) {
		out = append(out, s.policy(t, p.(map[string]any)["PolicyDocument"])...)
	}
	return out
}

// TestQueueNameBesideKarpenter: the interruption queue is named once, by the QueueName
// parameter (empty: fleetwright-<cluster>, never Karpenter's <cluster>), and that name is the one
// every rule sends to, the terminator's policy allows, and the outputs report.
func TestQueueNameBesideKarpenter(t *testing.T) {
	for _, tc := range []struct {
		name, queueName, want string
	}{
		{"default", "", "fleetwright-prod-1"},
		{"given", "prod-1-interruptions", "prod-1-interruptions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := map[string]string{"ClusterName": "prod-1", "OIDCProvider": "oidc.eks.eu-west-1.amazonaws.com/id/X", "NodeRoleName": "KarpenterNodeRole-prod-1"}
			if tc.queueName != "" {
				params["QueueName"] = tc.queueName
			}
			s := resolveStack(t, params)
			require.NotEqual(t, "prod-1", tc.want, "never Karpenter's queue name")
			arn := fmt.Sprintf("arn:aws:sqs:%s:%s:%s", cfnRegion, cfnAccount, tc.want)
			queue := s.resources["InterruptionQueue"]["Properties"].(map[string]any)
			require.Equal(t, tc.want, queue["QueueName"])
			rules := 0
			for id, r := range s.resources {
				if r["Type"] != "AWS::Events::Rule" {
					continue
				}
				rules++
				for _, target := range r["Properties"].(map[string]any)["Targets"].([]any) {
					require.Equal(t, arn, target.(map[string]any)["Arn"], "%s sends to the queue", id)
				}
			}
			require.Equal(t, 4, rules)
			var sqsResources []string
			for _, st := range s.rolePolicies(t, "TerminatorRole") {
				if strings.HasPrefix(st.Actions[0], "sqs:") {
					sqsResources = append(sqsResources, st.Resources...)
				}
			}
			require.Equal(t, []string{arn}, sqsResources, "the terminator reads exactly this queue")
			require.Equal(t, tc.want, s.outputs["InterruptionQueueName"])
			require.Equal(t, arn, s.outputs["InterruptionQueueArn"])
			policy := s.resources["InterruptionQueuePolicy"]["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)
			for _, st := range policy["Statement"].([]any) {
				require.Equal(t, arn, st.(map[string]any)["Resource"])
			}
		})
	}
}

// TestPodIdentityOrIRSA: with an OIDC provider both IRSA and EKS Pod Identity may assume the
// roles; without one only Pod Identity, and PodIdentityAssociations=true makes the
// associations of the launcher's and the terminator's ServiceAccounts to their roles.
func TestPodIdentityOrIRSA(t *testing.T) {
	base := map[string]string{"ClusterName": "prod-1", "NodeRoleName": "KarpenterNodeRole-prod-1"}
	trust := func(s *cfnStack, role string) []string {
		var sids []string
		for _, st := range s.policy(t, s.resources[role]["Properties"].(map[string]any)["AssumeRolePolicyDocument"]) {
			sids = append(sids, st.Sid)
		}
		return sids
	}
	irsa := resolveStack(t, map[string]string{"ClusterName": "prod-1", "NodeRoleName": "KarpenterNodeRole-prod-1", "OIDCProvider": "oidc.eks.eu-west-1.amazonaws.com/id/X"})
	require.Equal(t, []string{"IRSA", "EKSPodIdentity"}, trust(irsa, "LauncherRole"))
	require.NotContains(t, irsa.resources, "LauncherPodIdentity", "no association unless asked")

	base["PodIdentityAssociations"] = "true"
	pod := resolveStack(t, base)
	for _, sa := range []string{"launcher", "terminator"} {
		role := map[string]string{"launcher": "LauncherRole", "terminator": "TerminatorRole"}[sa]
		require.Equal(t, []string{"EKSPodIdentity"}, trust(pod, role), "no IRSA statement without an OIDC provider")
		assoc := pod.resources[map[string]string{"launcher": "LauncherPodIdentity", "terminator": "TerminatorPodIdentity"}[sa]]["Properties"].(map[string]any)
		require.Equal(t, map[string]any{"ClusterName": "prod-1", "Namespace": "fleetwright", "ServiceAccount": sa,
			"RoleArn": fmt.Sprintf("arn:aws:iam::%s:role/prod-1-fleetwright-%s", cfnAccount, sa)}, assoc)
	}
}
