package main

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// Condition reasons of a deleting NodeClaim's termination, as Karpenter's.
const (
	condReasonDraining        = "Draining"
	condReasonAwaitingVolumes = "AwaitingVolumeDetachment"
)

// setConditions records conditions on a NodeClaim's status, reading it afresh and writing only
// what changed (a condition keeps its transition time while its status stays). A claim that is
// gone has nothing to record.
func (e *executor) setConditions(ctx context.Context, claim string, conds ...metav1.Condition) error {
	if claim == "" || e.k == nil || e.k.claims.updateStatus == nil {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := e.k.claims.get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var nc karpv1.NodeClaim
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc); err != nil {
			return fmt.Errorf("decoding nodeclaim %s: %w", claim, err)
		}
		changed := false
		for _, c := range conds {
			changed = nc.SetCondition(c) || changed
		}
		if !changed {
			return nil
		}
		out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&nc)
		if err != nil {
			return fmt.Errorf("encoding nodeclaim %s: %w", claim, err)
		}
		list, _, _ := unstructured.NestedSlice(out, "status", "conditions")
		if err := unstructured.SetNestedSlice(u.Object, list, "status", "conditions"); err != nil {
			return fmt.Errorf("encoding nodeclaim %s conditions: %w", claim, err)
		}
		_, err = e.k.claims.updateStatus(ctx, u, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("recording conditions on nodeclaim %s: %w", claim, err)
	}
	return nil
}

func condTrue(t, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, Message: msg}
}

func condFalse(t, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
}

// listed names up to five items and says how many more there are.
func listed(items []string) string {
	const most = 5
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:most], ", "), len(items)-most)
}
