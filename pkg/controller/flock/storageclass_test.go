package flock

import (
	"context"
	"errors"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

func TestInstallLocalStorageClass(t *testing.T) {
	ctx := context.Background()
	t.Run("created when absent, idempotent", func(t *testing.T) {
		client := fake.NewSimpleClientset()
		for range 2 {
			if err := installLocalStorageClass(ctx, client); err != nil {
				t.Fatal(err)
			}
		}
		sc, err := client.StorageV1().StorageClasses().Get(ctx, LocalStorageClassName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sc.Provisioner != noProvisioner || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
			t.Errorf("StorageClass = %+v", sc)
		}
	})
	t.Run("an admin's class is kept", func(t *testing.T) {
		mine := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: LocalStorageClassName}, Provisioner: "example.com/disk"}
		client := fake.NewSimpleClientset(mine)
		if err := installLocalStorageClass(ctx, client); err != nil {
			t.Fatal(err)
		}
		sc, _ := client.StorageV1().StorageClasses().Get(ctx, LocalStorageClassName, metav1.GetOptions{})
		if sc.Provisioner != "example.com/disk" {
			t.Errorf("provisioner overwritten: %q", sc.Provisioner)
		}
	})
	t.Run("errors are returned", func(t *testing.T) {
		client := fake.NewSimpleClientset()
		client.PrependReactor("create", "storageclasses", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(storagev1.Resource("storageclasses"), LocalStorageClassName, errors.New("no"))
		})
		if err := installLocalStorageClass(ctx, client); err == nil || !apierrors.IsForbidden(errors.Unwrap(err)) {
			t.Errorf("err = %v, want the Forbidden error", err)
		}
	})
}
