package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// attachmentIndex holds the cluster's VolumeAttachments by the node they bind a volume to,
// from one watch. A drain asks it every round while it waits for volumes to detach; the API
// has no field selector for a VolumeAttachment's node, so asking the API server would LIST
// every VolumeAttachment of the cluster, several times a second for each draining node.
//
// The zero value is ready to use: the watch starts at the first question and runs as long as
// the process (the executor's).
type attachmentIndex struct {
	once sync.Once
	inf  cache.SharedIndexInformer
}

// byAttachedNode indexes VolumeAttachments by spec.nodeName.
const byAttachedNode = "node"

// on returns the VolumeAttachments that bind a volume to node, once the watch has listed.
func (a *attachmentIndex) on(ctx context.Context, cs kubernetes.Interface, node string) ([]*storagev1.VolumeAttachment, error) {
	a.once.Do(func() {
		a.inf = storageinformers.NewVolumeAttachmentInformer(cs, 0, cache.Indexers{byAttachedNode: func(o any) ([]string, error) {
			if va, ok := o.(*storagev1.VolumeAttachment); ok {
				return []string{va.Spec.NodeName}, nil
			}
			return nil, nil
		}})
		_ = a.inf.SetTransform(clusterstate.StripManagedFields) // only fails once the informer runs
		go a.inf.Run(make(chan struct{}))                       // never closed
	})
	if !cache.WaitForCacheSync(ctx.Done(), a.inf.HasSynced) {
		return nil, fmt.Errorf("waiting for the VolumeAttachments watch: %w", context.Cause(ctx))
	}
	objs, err := a.inf.GetIndexer().ByIndex(byAttachedNode, node)
	if err != nil {
		return nil, fmt.Errorf("looking up the volume attachments of %s: %w", node, err)
	}
	out := make([]*storagev1.VolumeAttachment, 0, len(objs))
	for _, o := range objs {
		if va, ok := o.(*storagev1.VolumeAttachment); ok {
			out = append(out, va)
		}
	}
	return out, nil
}

// attachments names the VolumeAttachments a drained node's termination waits for: terminating
// the instance before they are gone would leave EBS volumes attached to a dead instance until
// AWS notices (Karpenter waits for them too). They are the attachments of persistent volumes
// the drain moved, which is every one bound to the node but those of the pods still there that
// no drain moves (DaemonSet and mirror pods, pods terminating past their deletionTimestamp):
// their volumes stay attached until the instance goes, and waiting for them would wait for
// ever. An attachment of no persistent volume (an inline volume) is not waited for, as in
// Karpenter.
func (e *executor) attachments(ctx context.Context, node string, pods []corev1.Pod, now time.Time) ([]string, error) {
	vas, err := e.volumes.on(ctx, e.cs, node)
	if err != nil || len(vas) == 0 {
		return nil, err
	}
	staying, err := e.volumesOfStaying(ctx, pods, now)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, va := range vas {
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil && !staying[*pv] {
			out = append(out, va.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// volumesOfStaying names the persistent volumes of the pods on the node that no drain moves.
func (e *executor) volumesOfStaying(ctx context.Context, pods []corev1.Pod, now time.Time) (map[string]bool, error) {
	out := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if waitsFor(p, now) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue // moved, or done with its volumes
		}
		for _, v := range p.Spec.Volumes {
			name := claimOfVolume(p, v)
			if name == "" {
				continue
			}
			pvc, err := e.cs.CoreV1().PersistentVolumeClaims(p.Namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("reading the volume claim %s/%s of pod %s: %w", p.Namespace, name, p.Name, err)
			}
			if pvc.Spec.VolumeName != "" {
				out[pvc.Spec.VolumeName] = true
			}
		}
	}
	return out, nil
}

// claimOfVolume is the PersistentVolumeClaim a pod's volume mounts: named by the volume, or, for
// a generic ephemeral volume, <pod>-<volume> as Kubernetes names it; "" for other volumes.
func claimOfVolume(p *corev1.Pod, v corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return p.Name + "-" + v.Name
	}
	return ""
}
