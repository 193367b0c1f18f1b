// File status_updater.go: StatusUpdater: writing a Flock's status with retries on conflict.

package flock

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/generated/clientset/versioned"
)

// StatusUpdater writes the status of Flocks.
type StatusUpdater interface {
	// UpdateStatus applies mutate to a copy of flock's status and writes it
	// with UpdateStatus. On a conflict it reads the latest Flock from the
	// API server and applies mutate to that, a few times. mutate must
	// therefore be a function of the status it is given (it is called once
	// per attempt). Nothing is written when mutate changes nothing. It
	// returns the Flock as written (or as read, when nothing changed).
	UpdateStatus(ctx context.Context, flock *v1alpha1.Flock, mutate func(*v1alpha1.FlockStatus)) (*v1alpha1.Flock, error)
}

// NewStatusUpdater returns the StatusUpdater that writes through client.
func NewStatusUpdater(client versioned.Interface) StatusUpdater {
	return &realStatusUpdater{client: client, backoff: retry.DefaultRetry}
}

type realStatusUpdater struct {
	client versioned.Interface
	// backoff paces the attempts after conflicts.
	backoff wait.Backoff
}

var _ StatusUpdater = &realStatusUpdater{}

func (u *realStatusUpdater) UpdateStatus(ctx context.Context, flock *v1alpha1.Flock, mutate func(*v1alpha1.FlockStatus)) (*v1alpha1.Flock, error) {
	flocks := u.client.FlockV1alpha1().Flocks(flock.Namespace)
	current := flock
	var result *v1alpha1.Flock
	err := retry.RetryOnConflict(u.backoff, func() error {
		next := current.DeepCopy()
		mutate(&next.Status)
		if equality.Semantic.DeepEqual(current.Status, next.Status) {
			result = current
			return nil
		}
		updated, err := flocks.UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager})
		if err == nil {
			result = updated
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh, getErr := flocks.Get(ctx, flock.Name, metav1.GetOptions{})
		if getErr != nil {
			return getErr
		}
		if fresh.UID != flock.UID {
			return fmt.Errorf("flock %s/%s was replaced (uid %s, want %s)", flock.Namespace, flock.Name, fresh.UID, flock.UID)
		}
		current = fresh
		return err
	})
	return result, err
}
