package podproj

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
)

// Listers answers VolumeLookup from informer caches.
type Listers struct {
	Claims  corelisters.PersistentVolumeClaimLister
	Volumes corelisters.PersistentVolumeLister
	Classes storagelisters.StorageClassLister
}

// Claim implements VolumeLookup.
func (l Listers) Claim(ns, name string) (*corev1.PersistentVolumeClaim, bool) {
	c, err := l.Claims.PersistentVolumeClaims(ns).Get(name)
	return c, err == nil
}

// Volume implements VolumeLookup.
func (l Listers) Volume(name string) (*corev1.PersistentVolume, bool) {
	pv, err := l.Volumes.Get(name)
	return pv, err == nil
}

// StorageClass implements VolumeLookup.
func (l Listers) StorageClass(name string) (*storagev1.StorageClass, bool) {
	c, err := l.Classes.Get(name)
	return c, err == nil
}
