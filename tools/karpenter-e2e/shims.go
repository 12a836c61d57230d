package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// target is the stack the suites run against.
type target struct {
	kubeconfig  string
	server      string // the kube-apiserver's URL: the suites' CLUSTER_ENDPOINT
	awsURL      string // the AWS emulator
	clusterName string
	kube        client.Client
}

// suiteEnv is the suites' environment: the cluster through KUBECONFIG, the provider suite's
// CLUSTER_NAME and CLUSTER_ENDPOINT, and the SDK pointed at the emulator for every service the
// provider's environment makes a client of (it calls only EC2's DescribeAvailabilityZones at
// start; the specs run here read EC2 and SSM).
func (t target) suiteEnv() []string {
	env := []string{
		"KUBECONFIG=" + t.kubeconfig,
		"CLUSTER_NAME=" + t.clusterName,
		"CLUSTER_ENDPOINT=" + t.server,
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=fleetwright-local",
		"AWS_SECRET_ACCESS_KEY=fleetwright-local",
		"AWS_EC2_METADATA_DISABLED=true",
		"HOME=" + os.Getenv("HOME"),
		"PATH=" + os.Getenv("PATH"),
	}
	for _, svc := range []string{"EC2", "IAM", "SSM", "SQS", "STS"} {
		env = append(env, "AWS_ENDPOINT_URL_"+svc+"="+t.awsURL)
	}
	return env
}

// The shims: what the suites expect of a cluster running Karpenter that Fleetwright does not
// make, each as small as the suites allow (docs/development.md, "Karpenter's end-to-end suites").
const (
	shimNamespace  = "kube-system"
	shimDeployment = "karpenter"
	fieldOwner     = "karpenter-e2e"
)

// shimCRDs are the suites' clean-up kinds Fleetwright does not serve: their AfterEach lists every
// kind of their CleanableObjects, and a kind the API does not know fails every spec after a
// 15-minute wait. They are installed as CRDs only; nothing acts on their objects.
var shimCRDs = []struct{ module, path string }{
	{coreModule, "pkg/apis/crds/karpenter.sh_nodeoverlays.yaml"},
	{coreModule, "pkg/apis/crds/autoscaling.x-k8s.io_capacitybuffers.yaml"},
	{vpcModule, "config/crd/bases/vpcresources.k8s.aws_securitygrouppolicies.yaml"}, // the provider's suites
}

// installShims installs the CRDs and the settings Deployment, and writes the node class and
// pool files the core suite takes, into work.
func installShims(ctx context.Context, t target, mods map[string]string, work string) (nodeClass, nodePool string, err error) {
	for _, c := range shimCRDs {
		if err := applyCRD(ctx, t.kube, filepath.Join(mods[c.module], filepath.FromSlash(c.path))); err != nil {
			return "", "", err
		}
	}
	if err := applySettings(ctx, t, "Strict"); err != nil {
		return "", "", err
	}
	// As the provider's upstream-e2etests target: its default EC2NodeClass with the cluster's
	// name, and its default NodePool.
	envDir := filepath.Join(mods[awsModule], "test", "pkg", "environment", "aws")
	b, err := os.ReadFile(filepath.Join(envDir, "default_ec2nodeclass.yaml"))
	if err != nil {
		return "", "", fmt.Errorf("reading the provider's default node class: %w", err)
	}
	nodeClass = filepath.Join(work, "default_ec2nodeclass.yaml")
	expanded := os.Expand(string(b), func(k string) string {
		if k == "CLUSTER_NAME" {
			return t.clusterName
		}
		return "$" + k
	})
	if err := os.WriteFile(nodeClass, []byte(expanded), 0o644); err != nil {
		return "", "", err
	}
	b, err = os.ReadFile(filepath.Join(envDir, "default_nodepool.yaml"))
	if err != nil {
		return "", "", fmt.Errorf("reading the provider's default node pool: %w", err)
	}
	nodePool = filepath.Join(work, "default_nodepool.yaml")
	return nodeClass, nodePool, os.WriteFile(nodePool, b, 0o644)
}

func applyCRD(ctx context.Context, c client.Client, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading a shim CRD: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	u.SetManagedFields(nil)
	if err := c.Patch(ctx, u, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s: %w", filepath.Base(path), err)
	}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// applySettings makes the zero-replica Deployment kube-system/karpenter, whose one container's
// environment the provider suite reads as Karpenter's settings (ExpectSettings) and compares
// with what a spec needs (ExpectSettingsOverridden): the settings Fleetwright runs with. Its
// MIN_VALUES_POLICY is the suite's, so no spec asks for a change: a change would roll the
// Deployment out and wait for a Karpenter pod to hold Karpenter's leader Lease.
func applySettings(ctx context.Context, t target, policy string) error {
	labels := map[string]string{"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: shimDeployment, Namespace: shimNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "controller",
					Image: "fleetwright.invalid/settings-shim", // never runs: zero replicas
					Env: []corev1.EnvVar{
						{Name: "CLUSTER_NAME", Value: t.clusterName},
						{Name: "CLUSTER_ENDPOINT", Value: t.server},
						{Name: "MIN_VALUES_POLICY", Value: policy},
					},
				}}},
			},
		},
	}
	if err := t.kube.Patch(ctx, d, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying the settings Deployment %s/%s: %w", shimNamespace, shimDeployment, err)
	}
	return nil
}

// The kinds the suites make, labelled testing/cluster: what clean removes (the core suite's
// CleanableObjects, the provider's EC2NodeClass).
const discoveryLabel = "testing/cluster"

var cleanKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"},
	{Group: "", Version: "v1", Kind: "Pod"},
	{Group: "", Version: "v1", Kind: "LimitRange"},
	{Group: "", Version: "v1", Kind: "PersistentVolumeClaim"},
	{Group: "", Version: "v1", Kind: "PersistentVolume"},
	{Group: "", Version: "v1", Kind: "PodTemplate"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
	{Group: "scheduling.k8s.io", Version: "v1", Kind: "PriorityClass"},
	{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"},
	{Group: "autoscaling.x-k8s.io", Version: "v1beta1", Kind: "CapacityBuffer"},
	{Group: "karpenter.sh", Version: "v1alpha1", Kind: "NodeOverlay"},
	{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"},
	{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaim"},
	{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClass"},
}

// clean deletes every object of cleanKinds labelled testing/cluster (taking off the suites'
// testing finalizer) and waits up to five minutes for the nodes of the suites' pools to go, so
// the next process starts on the clean cluster the suites' BeforeEach checks for.
func clean(ctx context.Context, c client.Client) error {
	sel := client.HasLabels{discoveryLabel}
	var errs []error
	for _, gvk := range cleanKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk)
		if err := c.List(ctx, list, sel); err != nil {
			errs = append(errs, fmt.Errorf("listing %s: %w", gvk.Kind, err))
			continue
		}
		for i := range list.Items {
			obj := &list.Items[i]
			obj.SetGroupVersionKind(gvk)
			if fs := obj.GetFinalizers(); len(fs) > 0 {
				var keep []string
				for _, f := range fs {
					if f != "testing/finalizer" {
						keep = append(keep, f)
					}
				}
				if len(keep) != len(fs) {
					patch := client.MergeFrom(obj.DeepCopy())
					obj.SetFinalizers(keep)
					if err := c.Patch(ctx, obj, patch); client.IgnoreNotFound(err) != nil {
						errs = append(errs, err)
					}
				}
			}
			err := c.Delete(ctx, obj, client.GracePeriodSeconds(0), client.PropagationPolicy(metav1.DeletePropagationForeground))
			if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("deleting %s %s: %w", gvk.Kind, obj.GetName(), err))
			}
		}
	}
	left, err := waitGone(ctx, c, 5*time.Minute)
	if err == nil {
		return errors.Join(errs...)
	}
	// Something Fleetwright should have finished did not (its failing spec says what): force the
	// finalizers off what is stuck deleting, so the specs after it start on a clean cluster, and
	// say so.
	var forced []string
	for _, obj := range left {
		if obj.GetDeletionTimestamp() == nil || len(obj.GetFinalizers()) == 0 {
			continue
		}
		patch := client.MergeFrom(obj.DeepCopy())
		obj.SetFinalizers(nil)
		if err := c.Patch(ctx, obj, patch); client.IgnoreNotFound(err) == nil {
			forced = append(forced, obj.GetObjectKind().GroupVersionKind().Kind+" "+obj.GetName())
		}
	}
	errs = append(errs, fmt.Errorf("still there after 5 minutes: %s; finalizers forced off (stuck deleting): %v", names(left), forced))
	if left, err := waitGone(ctx, c, time.Minute); err != nil {
		errs = append(errs, fmt.Errorf("still there after that: %s", names(left)))
	}
	return errors.Join(errs...)
}

// waitGone waits until no node of a pool and no NodeClaim is left, and returns those left.
func waitGone(ctx context.Context, c client.Client, timeout time.Duration) ([]*metav1.PartialObjectMetadata, error) {
	var left []*metav1.PartialObjectMetadata
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		left = nil
		for _, gvk := range []schema.GroupVersionKind{{Version: "v1", Kind: "Node"}, {Group: "karpenter.sh", Version: "v1", Kind: "NodeClaim"}} {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk)
			if err := c.List(ctx, list); err != nil {
				return false, nil
			}
			for i := range list.Items {
				obj := &list.Items[i]
				if gvk.Kind == "Node" && obj.GetLabels()["karpenter.sh/nodepool"] == "" && obj.GetLabels()["karpenter.sh/registered"] == "" {
					continue // not a node Fleetwright launched
				}
				obj.SetGroupVersionKind(gvk)
				left = append(left, obj)
			}
		}
		return len(left) == 0, nil
	})
	return left, err
}

func names(objs []*metav1.PartialObjectMetadata) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind+" "+o.GetName())
	}
	return strings.Join(out, ", ")
}
