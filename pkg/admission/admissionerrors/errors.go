// Package admissionerrors holds the errors flock-apiserver's admission
// plugins share: the answers that say "not now" rather than "no".
package admissionerrors

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RetryAfterSeconds is the Retry-After of the plugins' 503 and 504 answers.
const RetryAfterSeconds = 1

// ServiceUnavailable is a 503 with a Retry-After header: the plugin cannot
// decide yet (caches not synced, the core cluster unreachable), and a retry
// may succeed. It is never a refusal of the object.
func ServiceUnavailable(msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusServiceUnavailable,
		Reason:  metav1.StatusReasonServiceUnavailable,
		Message: msg,
		Details: &metav1.StatusDetails{RetryAfterSeconds: RetryAfterSeconds},
	}}
}

// Timeout is a 504 with a Retry-After header: the core cluster did not
// answer in time.
func Timeout(msg string) *apierrors.StatusError {
	return apierrors.NewTimeoutError(msg, RetryAfterSeconds)
}
