// Package crdtest checks Karpenter's API as Fleetwright serves it against a real
// kube-apiserver (tools/localcluster): the generated CRDs in deploy/crds install and become
// Established, the example manifests in deploy/examples apply unchanged and read back into the
// Go types of pkg/apis, the schema rejects what Karpenter's rejects (misspelt fields, bad
// operators, weights, durations, CEL rules), kubectl shows Karpenter's printer columns, and
// the v1alpha5 objects translate into v1 objects the server accepts.
//
// It holds tests only; run them with `go test ./tools/crdtest/`.
package crdtest
