package apiserver

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/yaml"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// applySchemaCheck answers a server-side apply of a Flock whose body does
// not fit the Flock's schema (an unknown or mistyped field) with 422
// Invalid, one cause per field, before the request reaches the generic
// patch handler: k8s.io/apiserver finds the same fault when it makes the
// apply's typed object, but returns it as a plain error, which becomes a
// 500 (kube-apiserver answers so for built-in kinds too). A client that
// retries 5xx (a controller, a GitOps tool) would then retry a request that
// can never succeed. Every other request, and an apply that fits, goes on
// untouched; the check uses the type converter the patch handler uses.
type applySchemaCheck struct {
	converter atomic.Pointer[managedfields.TypeConverter]
	// maxBody is the largest body checked; a larger one goes on to the
	// handler, which refuses it (413).
	maxBody int64
}

// set gives the check the group's type converter (once the group is
// installed); until then requests pass unchecked.
func (a *applySchemaCheck) set(tc managedfields.TypeConverter) { a.converter.Store(&tc) }

// wrap returns next behind the check.
func (a *applySchemaCheck) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status := a.check(r); status != nil {
			responsewriters.ErrorNegotiated(status, Codecs, v1alpha1.SchemeGroupVersion, w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// check returns the refusal of r, or nil to let it go on. It reads the
// body of an apply of a Flock (or of its status) and puts it back.
func (a *applySchemaCheck) check(r *http.Request) error {
	tc := a.converter.Load()
	info, ok := request.RequestInfoFrom(r.Context())
	if tc == nil || r.Body == nil || !ok || info.Verb != "patch" || info.APIGroup != flock.GroupName || info.Resource != "flocks" ||
		(info.Subresource != "" && info.Subresource != "status") {
		return nil
	}
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != string(types.ApplyYAMLPatchType) {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, a.maxBody+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil || int64(len(body)) > a.maxBody {
		return nil // the handler reads and answers it
	}
	patch := &unstructured.Unstructured{Object: map[string]any{}}
	if err := yaml.Unmarshal(body, &patch.Object); err != nil || patch.GetKind() != "Flock" || patch.GroupVersionKind().Group != flock.GroupName {
		return nil // the handler's own answer (a decoding error, or a kind it refuses)
	}
	_, err = (*tc).ObjectToTyped(patch, typed.AllowDuplicates)
	var faults typed.ValidationErrors
	if err == nil || !errors.As(err, &faults) {
		return nil
	}
	var errs field.ErrorList
	for _, f := range faults {
		errs = append(errs, &field.Error{Type: field.ErrorTypeInvalid, Field: strings.TrimPrefix(f.Path, "."), BadValue: field.OmitValueType{}, Detail: f.ErrorMessage})
	}
	return apierrors.NewInvalid(flock.Kind("Flock"), info.Name, errs)
}
