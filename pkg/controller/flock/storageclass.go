package flock

// storageclass.go installs the flock-local StorageClass that node-local
// member volumes belong to, once, when the server's controller starts.

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// storageClassRetry is how often EnsureLocalStorageClass retries a failure.
const storageClassRetry = 5 * time.Second

// installLocalStorageClass creates the flock-local StorageClass when it is
// absent. An existing class of that name is left alone (an admin may have
// made it); one with another provisioner is reported, since node-local
// volumes are made by the controller and need none.
func installLocalStorageClass(ctx context.Context, client kubernetes.Interface) error {
	want := NewLocalStorageClass()
	sc, err := client.StorageV1().StorageClasses().Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		if sc.Provisioner != want.Provisioner {
			klog.FromContext(ctx).Info("Warning: StorageClass has a provisioner; node-local Flock volumes are made by the Flock controller",
				"storageClass", klog.KObj(sc), "provisioner", sc.Provisioner)
		}
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading StorageClass %s: %w", want.Name, err)
	}
	_, err = client.StorageV1().StorageClasses().Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating StorageClass %s: %w", want.Name, err)
	}
	klog.FromContext(ctx).Info("Installed StorageClass", "storageClass", want.Name)
	return nil
}

// EnsureLocalStorageClass installs the flock-local StorageClass, retrying
// every few seconds until it succeeds or ctx ends.
func EnsureLocalStorageClass(ctx context.Context, client kubernetes.Interface) {
	_ = wait.PollUntilContextCancel(ctx, storageClassRetry, true, func(ctx context.Context) (bool, error) {
		if err := installLocalStorageClass(ctx, client); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot install the flock-local StorageClass; retrying")
			return false, nil
		}
		return true, nil
	})
}
