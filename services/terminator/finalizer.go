package main

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// ensureFinalizers puts the termination finalizer on registered NodeClaims and their Nodes
// that lack it, so that whoever deletes one (kubectl, the cloud deleting the Node of a
// terminated instance) leaves the terminator time to drain the node and terminate the
// instance. The terminator, which removes the finalizer, is also the one that adds it.
func (k *kube) ensureFinalizers(ctx context.Context, cands []candidate) error {
	for _, c := range cands {
		if c.ClaimUnfinalized {
			if err := k.claims.addFinalizer(ctx, c.Name); err != nil {
				return err
			}
		}
		if c.NodeUnfinalized {
			if err := k.nodes.addFinalizer(ctx, c.NodeName); err != nil {
				return err
			}
		}
	}
	return nil
}

// finalized reports whether the termination finalizer holds an object.
func finalized(o metav1.Object) bool {
	return slices.Contains(o.GetFinalizers(), karpv1.TerminationFinalizer)
}

// writer writes one kind of cluster-scoped object straight to the API server: Nodes through
// the clientset, NodeClaims (unstructured, so no field is lost) through the dynamic client.
type writer[T metav1.Object] struct {
	kind   string
	get    func(context.Context, string, metav1.GetOptions) (T, error)
	update func(context.Context, T, metav1.UpdateOptions) (T, error)
	del    func(context.Context, string, metav1.DeleteOptions) error
	// updateStatus writes the status subresource (NodeClaims' conditions); nil for Nodes.
	updateStatus func(context.Context, T, metav1.UpdateOptions) (T, error)
}

// find reads the object named name afresh; nil if the name is empty or there is no such object.
func (w writer[T]) find(ctx context.Context, name string) (T, error) {
	var none T
	if name == "" {
		return none, nil
	}
	obj, err := w.get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return none, nil
	}
	if err != nil {
		return none, fmt.Errorf("getting %s %s: %w", w.kind, name, err)
	}
	return obj, nil
}

// modify reads the object afresh and, if change says it changed it, writes it back. The update
// carries the resourceVersion read, so it fails if someone else wrote in between (optimistic
// locking); then it reads and tries again. It reports whether it wrote.
func (w writer[T]) modify(ctx context.Context, name string, change func(T) bool) (bool, error) {
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := w.get(ctx, name, metav1.GetOptions{})
		if err != nil || !change(obj) {
			return err
		}
		_, err = w.update(ctx, obj, metav1.UpdateOptions{})
		wrote = err == nil
		return err
	})
	return wrote, err
}

func (w writer[T]) addFinalizer(ctx context.Context, name string) error {
	_, err := w.modify(ctx, name, func(o T) bool {
		if o.GetDeletionTimestamp() != nil || finalized(o) {
			return false
		}
		o.SetFinalizers(append(o.GetFinalizers(), karpv1.TerminationFinalizer))
		return true
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("adding termination finalizer to %s %s: %w", w.kind, name, err)
	}
	return nil
}

// release removes the termination finalizer and deletes the object; either may be gone.
func (w writer[T]) release(ctx context.Context, name string) error {
	_, err := w.modify(ctx, name, func(o T) bool {
		if !finalized(o) {
			return false
		}
		o.SetFinalizers(slices.DeleteFunc(o.GetFinalizers(), func(f string) bool { return f == karpv1.TerminationFinalizer }))
		return true
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer from %s %s: %w", w.kind, name, err)
	}
	if err := w.del(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", w.kind, name, err)
	}
	return nil
}
