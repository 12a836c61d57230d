//go:build tools

// Package suites pins Karpenter's end-to-end suites. The suites are _test.go packages of the
// modules required in go.mod, which cannot be imported; this file imports what their test files
// import, so `go mod tidy` keeps every module and checksum that `go test -c` of the suites needs.
// It is never built (the tools tag). tools/karpenter-e2e builds the suites from this module.
package suites

import (
	_ "github.com/aws/karpenter-provider-aws/test/pkg/environment/aws"
	_ "github.com/aws/karpenter-provider-aws/test/suites/scheduling"
	_ "github.com/awslabs/operatorpkg/object"
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "github.com/samber/lo"
	_ "k8s.io/api/apps/v1"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/api/scheduling/v1"
	_ "k8s.io/apimachinery/pkg/api/errors"
	_ "k8s.io/apimachinery/pkg/api/resource"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	_ "k8s.io/apimachinery/pkg/labels"
	_ "k8s.io/apimachinery/pkg/types"
	_ "k8s.io/apimachinery/pkg/util/intstr"
	_ "k8s.io/apimachinery/pkg/util/sets"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/rest"
	_ "k8s.io/client-go/tools/cache"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
	_ "sigs.k8s.io/controller-runtime/pkg/controller"
	_ "sigs.k8s.io/controller-runtime/pkg/log"
	_ "sigs.k8s.io/controller-runtime/pkg/manager"
	_ "sigs.k8s.io/controller-runtime/pkg/predicate"
	_ "sigs.k8s.io/controller-runtime/pkg/reconcile"
	_ "sigs.k8s.io/karpenter/kwok/apis/v1alpha1"
	_ "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	_ "sigs.k8s.io/karpenter/pkg/apis/v1"
	_ "sigs.k8s.io/karpenter/pkg/operator/options"
	_ "sigs.k8s.io/karpenter/pkg/test"
	_ "sigs.k8s.io/karpenter/pkg/test/expectations"
	_ "sigs.k8s.io/karpenter/pkg/utils/node"
	_ "sigs.k8s.io/karpenter/pkg/utils/resources"
	_ "sigs.k8s.io/karpenter/test/pkg/debug"
	_ "sigs.k8s.io/karpenter/test/pkg/environment/common"
)
