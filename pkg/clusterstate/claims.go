package clusterstate

import (
	"context"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// ReadClaim reads a NodeClaim from the API server, not the cache (which may lag behind a write
// made a moment ago). A missing claim is the API's NotFound error (apierrors.IsNotFound).
func ReadClaim(ctx context.Context, api dynamic.NamespaceableResourceInterface, name string) (*karpv1.NodeClaim, error) {
	u, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return claimFrom(u)
}

// UpdateClaim reads the NodeClaim fresh, applies mutate and writes back what changed — the
// object (labels, annotations, finalizers) and its status, each only if mutate changed it —
// retrying from a fresh read on conflicts. A missing claim is the API's NotFound error.
func UpdateClaim(ctx context.Context, api dynamic.NamespaceableResourceInterface, name string, mutate func(*karpv1.NodeClaim)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nc, err := ReadClaim(ctx, api, name)
		if err != nil {
			return err
		}
		before := nc.DeepCopy()
		mutate(nc)
		if !reflect.DeepEqual(before.ObjectMeta, nc.ObjectMeta) || !reflect.DeepEqual(before.Spec, nc.Spec) {
			u, err := claimObject(nc)
			if err != nil {
				return err
			}
			if u, err = api.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
				return err
			}
			nc.ResourceVersion = u.GetResourceVersion()
		}
		if reflect.DeepEqual(before.Status, nc.Status) {
			return nil
		}
		u, err := claimObject(nc)
		if err != nil {
			return err
		}
		_, err = api.UpdateStatus(ctx, u, metav1.UpdateOptions{})
		return err
	})
}

// CreateClaim creates a NodeClaim; its status is written by a later UpdateClaim (the API
// ignores status on create).
func CreateClaim(ctx context.Context, api dynamic.NamespaceableResourceInterface, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	u, err := claimObject(nc)
	if err != nil {
		return nil, err
	}
	if u, err = api.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	return claimFrom(u)
}

func claimFrom(u *unstructured.Unstructured) (*karpv1.NodeClaim, error) {
	var nc karpv1.NodeClaim
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc); err != nil {
		return nil, fmt.Errorf("decoding nodeclaim %s: %w", u.GetName(), err)
	}
	return &nc, nil
}

func claimObject(nc *karpv1.NodeClaim) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nc)
	if err != nil {
		return nil, fmt.Errorf("encoding nodeclaim %s: %w", nc.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(karpv1.SchemeGroupVersion.String())
	u.SetKind("NodeClaim")
	return u, nil
}
