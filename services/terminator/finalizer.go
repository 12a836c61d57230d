package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// ensureFinalizers puts the termination finalizer on registered NodeClaims and their Nodes
// that lack it, so that whoever deletes one (kubectl, the cloud deleting the Node of a
// terminated instance) leaves the terminator time to drain the node and terminate the
// instance. The terminator, which removes the finalizer, is also the one that adds it.
func (k *kube) ensureFinalizers(ctx context.Context, cands []candidate) error {
	for _, c := range cands {
		if c.ClaimUnfinalized {
			if err := k.addFinalizer(ctx, &karpv1.NodeClaim{}, c.Name); err != nil {
				return err
			}
		}
		if c.NodeUnfinalized {
			if err := k.addFinalizer(ctx, &corev1.Node{}, c.NodeName); err != nil {
				return err
			}
		}
	}
	return nil
}

func (k *kube) addFinalizer(ctx context.Context, obj client.Object, name string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k.direct.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		if obj.GetDeletionTimestamp() != nil || controllerutil.ContainsFinalizer(obj, karpv1.TerminationFinalizer) {
			return nil
		}
		before := obj.DeepCopyObject().(client.Object)
		controllerutil.AddFinalizer(obj, karpv1.TerminationFinalizer)
		return k.direct.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("adding termination finalizer to %T %s: %w", obj, name, err)
	}
	return nil
}
