package v1

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResolvedAMIFamily(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name   string
		family *string
		terms  []AMISelectorTerm
		want   string
	}{
		{"explicit family wins", str("Bottlerocket"), []AMISelectorTerm{{Alias: "al2023@latest"}}, "Bottlerocket"},
		{"from alias", nil, []AMISelectorTerm{{Alias: "al2023@latest"}}, "AL2023"},
		{"pinned alias", nil, []AMISelectorTerm{{Alias: "bottlerocket@v1.20.0"}}, "Bottlerocket"},
		{"no alias, no family", nil, []AMISelectorTerm{{ID: "ami-1"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := &EC2NodeClass{Spec: EC2NodeClassSpec{AMIFamily: tc.family, AMISelectorTerms: tc.terms}}
			require.Equal(t, tc.want, nc.ResolvedAMIFamily())
		})
	}
}

func TestAlias(t *testing.T) {
	term := AMISelectorTerm{Alias: "bottlerocket@v1.20.0"}
	require.Equal(t, "bottlerocket", term.AliasFamily())
	require.Equal(t, "v1.20.0", term.AliasVersion())
	require.Equal(t, "al2023@latest", AliasOf(AMIFamilyAL2023, "latest"))
	require.Equal(t, "", AliasOf(AMIFamilyCustom, "latest"))
}
