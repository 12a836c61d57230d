// Package clusterstate is the services' shared read side of the cluster: the one cache builder
// (Cache), the informer transforms, and the read models every service shares (pods by node and
// by nomination, NodeClaims by name and by instance, pools with v1alpha5 translated once).
package clusterstate

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// Typed returns an informer transform that converts each object a dynamic informer receives
// into *T once, as it enters the cache, without its managed fields, so readers neither convert
// on every read nor hold what no service reads. An object that does not convert stays
// unstructured (a transform error would stall the informer's watch); List and Get report it.
func Typed[T any, PT interface {
	*T
	metav1.Object
}]() cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		out := PT(new(T))
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
			u.SetManagedFields(nil)
			return u, nil
		}
		out.SetManagedFields(nil)
		return out, nil
	}
}

// List returns the informer's objects of type *T; bad is called with the name of each object
// that did not convert (see Typed) and the error converting it now.
func List[T any](inf cache.SharedIndexInformer, bad func(name string, err error)) []*T {
	var out []*T
	if inf == nil {
		return nil
	}
	for _, o := range inf.GetStore().List() {
		if t, ok := o.(*T); ok {
			out = append(out, t)
			continue
		}
		if u, ok := o.(*unstructured.Unstructured); ok && bad != nil {
			bad(u.GetName(), runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, new(T)))
		}
	}
	return out
}

// Get returns the informer's object with the key (namespace/name, or name) if it is a *T.
func Get[T any](inf cache.SharedIndexInformer, key string) (*T, bool) {
	if inf == nil {
		return nil, false
	}
	o, ok, err := inf.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil, false
	}
	t, ok := o.(*T)
	return t, ok
}

// StripManagedFields is the informer transform for typed informers: it drops the managed fields
// (server-side apply bookkeeping no service reads, often the larger part of a small object)
// before an object enters the cache.
func StripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// SlimPod is the pod informers' transform. Besides the managed fields it drops what no service
// reads and what weighs most in a large cluster: the last-applied-configuration annotation,
// container statuses, ephemeral containers, and each container's command, arguments,
// environment, probes, mounts and lifecycle hooks. What scheduling, nominations and drains read
// stays: resources, ports, restart policy, volumes, affinity, tolerations, owners, annotations,
// phase and conditions.
func SlimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return StripManagedFields(obj)
	}
	p.ManagedFields = nil
	delete(p.Annotations, corev1.LastAppliedConfigAnnotation)
	p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses = nil, nil, nil
	p.Spec.EphemeralContainers = nil
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			c := &cs[i]
			c.Command, c.Args, c.Env, c.EnvFrom, c.VolumeMounts, c.VolumeDevices = nil, nil, nil, nil, nil, nil
			c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
		}
	}
	return p, nil
}

// SlimNode is the node informers' transform: besides the managed fields it drops the
// last-applied-configuration annotation and the list of images the node holds (often its
// largest part), which no service reads.
func SlimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return StripManagedFields(obj)
	}
	n.ManagedFields = nil
	delete(n.Annotations, corev1.LastAppliedConfigAnnotation)
	n.Status.Images = nil
	return n, nil
}
