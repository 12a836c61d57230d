package main

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/translate"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// drifts keeps each launched NodeClaim's Drifted condition true to disruption.Drifted: True,
// with the reason and what it means, while the claim no longer matches its NodePool or node
// class; gone when it matches again or is not launched. It also brings the claims' hash
// annotations to the current hash versions (disruption.Rehash). What to do about a drifted
// node (replace it, within the pool's budgets) is the disruption controller's, which reads the
// condition.
//
// Every replica runs the pass: it reads the cache and writes a claim only when the condition or
// annotations differ, through clusterstate.UpdateClaim (fresh read, conflicts retried), so
// replicas that race write the same thing once, and only the one whose write made the claim
// drifted records the event.
type drifts struct {
	*launcher
	cache  *clusterstate.Cache
	store  *kubeClaims
	legacy translate.Options // for AWSNodeTemplates (their default instance profile)
}

// poolKey names a pool as a claim does: by karpenter.sh/nodepool, or a v1alpha5 claim by
// karpenter.sh/provisioner-name.
type poolKey struct {
	name   string
	legacy bool
}

// pass looks at every claim once; a write that fails is retried on the next pass.
func (d *drifts) pass(ctx context.Context) error {
	pools := map[poolKey]*karpv1.NodePool{}
	for _, p := range d.cache.Pools() {
		pools[poolKey{p.Name, p.Legacy}] = p.NodePool
	}
	type gaugeKey struct{ pool, reason string }
	counts := map[gaugeKey]float64{}
	var errs []error
	for _, nc := range d.cache.Claims() {
		if nc.DeletionTimestamp != nil {
			continue
		}
		key := poolKey{name: nc.Labels[karpv1.NodePoolLabelKey]}
		if key.name == "" {
			key = poolKey{name: nc.Labels[scheduling.LabelProvisionerName], legacy: true}
		}
		pool, class := pools[key], d.classOf(nc)
		if drift, ok := disruption.Drifted(nc, pool, class); ok {
			counts[gaugeKey{key.name, string(drift.Reason)}]++
		}
		if !driftChanges(nc, pool, class) {
			continue
		}
		if err := d.record(ctx, nc.Name, string(nc.UID), pool, class); err != nil && !errors.Is(err, errClaimNotFound) {
			errs = append(errs, fmt.Errorf("recording drift of nodeclaim %s: %w", nc.Name, err))
		}
	}
	d.metrics.drifted.Reset()
	for k, n := range counts {
		d.metrics.drifted.WithLabelValues(k.pool, k.reason).Set(n)
	}
	return errors.Join(errs...)
}

// classOf is the claim's node class as the launcher resolves it now (an AWSNodeTemplate
// translated), or nil when there is none.
func (d *drifts) classOf(nc *karpv1.NodeClaim) *ec2v1.EC2NodeClass {
	ref := nc.Spec.NodeClassRef
	if ref == nil {
		return nil
	}
	class, err := d.cache.NodeClass(ref.Kind, ref.Name, d.legacy)
	if err != nil {
		return nil // gone or untranslatable: nothing to compare with (the launch path says why)
	}
	return class
}

// driftChanges reports whether the claim, as cached, needs a write: new hash annotations, or
// a Drifted condition that is not what Drifted says now.
func driftChanges(nc *karpv1.NodeClaim, pool *karpv1.NodePool, class *ec2v1.EC2NodeClass) bool {
	if !nc.IsTrue(karpv1.ConditionTypeLaunched) {
		return nc.Condition(karpv1.ConditionTypeDrifted) != nil
	}
	if disruption.Rehash(nc, pool, class) != nil {
		return true
	}
	next := nc.DeepCopy()
	setDrifted(next, pool, class)
	return !equalConditions(nc.Status.Conditions, next.Status.Conditions)
}

// setDrifted brings the claim's hash annotations up to date and sets or removes its Drifted
// condition; it reports whether the claim became drifted.
func setDrifted(nc *karpv1.NodeClaim, pool *karpv1.NodePool, class *ec2v1.EC2NodeClass) (became bool) {
	if !nc.IsTrue(karpv1.ConditionTypeLaunched) {
		meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeDrifted)
		return false
	}
	if add := disruption.Rehash(nc, pool, class); add != nil {
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		maps.Copy(nc.Annotations, add)
	}
	drift, drifted := disruption.Drifted(nc, pool, class)
	if !drifted {
		meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeDrifted)
		return false
	}
	was := nc.IsTrue(karpv1.ConditionTypeDrifted)
	nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: string(drift.Reason),
		Message: truncate(drift.Message, 1000)})
	return !was
}

// record writes the change on the claim as the API server has it now, and tells of a claim
// that became drifted in an event and the log.
func (d *drifts) record(ctx context.Context, name, uid string, pool *karpv1.NodePool, class *ec2v1.EC2NodeClass) error {
	var became, cleared bool
	var cond *metav1.Condition
	err := d.store.update(ctx, name, func(nc *karpv1.NodeClaim) {
		was := nc.Condition(karpv1.ConditionTypeDrifted) != nil
		became = setDrifted(nc, pool, class)
		cond = nc.Condition(karpv1.ConditionTypeDrifted)
		cleared = was && cond == nil
	})
	if err != nil {
		return err
	}
	if cleared {
		d.log.Info().Str("nodeclaim", name).Msg("nodeclaim no longer drifted")
	}
	if !became || cond == nil {
		return nil
	}
	d.events.Eventf(clusterstate.ClaimRef(name, uid), corev1.EventTypeNormal, reasonDrifted, "Drifted (%s): %s", cond.Reason, cond.Message)
	d.log.Info().Str("nodeclaim", name).Str("reason", cond.Reason).Str("message", cond.Message).Msg("nodeclaim drifted")
	return nil
}

// equalConditions compares conditions but for their transition times (which SetCondition keeps
// while the status holds).
func equalConditions(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.LastTransitionTime, y.LastTransitionTime = metav1.Time{}, metav1.Time{}
		if x != y {
			return false
		}
	}
	return true
}
