package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKubeVerb(t *testing.T) {
	for _, c := range []struct{ method, path, watch, verb, resource string }{
		{"GET", "/api/v1/pods", "", "list", "pods"},
		{"GET", "/api/v1/pods", "true", "watch", "pods"},
		{"GET", "/api/v1/namespaces/default/pods/inflate-1", "", "get", "pods"},
		{"PATCH", "/api/v1/namespaces/default/pods/inflate-1", "", "patch", "pods"},
		{"POST", "/api/v1/namespaces/default/pods/inflate-1/eviction", "", "create", "pods/eviction"},
		{"PUT", "/apis/karpenter.sh/v1/nodeclaims/default-abcde/status", "", "update", "nodeclaims/status"},
		{"POST", "/apis/karpenter.sh/v1/nodeclaims", "", "create", "nodeclaims"},
		{"GET", "/apis/karpenter.sh/v1/watch/nodeclaims", "", "watch", "nodeclaims"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/fleetwright/leases/fleetwright-scheduler", "", "update", "leases"},
		{"GET", "/api/v1/namespaces/fleetwright", "", "get", "namespaces"},
		{"DELETE", "/api/v1/nodes/ip-10-0-0-1", "", "delete", "nodes"},
		{"GET", "/apis", "", "get", ""},
		{"GET", "/version", "", "get", ""},
	} {
		verb, resource := kubeVerb(c.method, c.path, c.watch)
		assert.Equal(t, c.verb, verb, "%s %s", c.method, c.path)
		assert.Equal(t, c.resource, resource, "%s %s", c.method, c.path)
	}
}
