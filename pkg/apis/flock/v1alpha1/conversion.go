package v1alpha1

import (
	"k8s.io/apimachinery/pkg/conversion"

	"flock.dev/flock/pkg/apis/flock"
)

// The internal Flock holds its spec by pointer (see flock.Flock.Spec), so
// the conversions of a whole Flock are written here; everything else is
// generated.

// Convert_v1alpha1_Flock_To_flock_Flock converts a Flock to the internal
// type, whose spec it always sets.
func Convert_v1alpha1_Flock_To_flock_Flock(in *Flock, out *flock.Flock, s conversion.Scope) error {
	if err := autoConvert_v1alpha1_Flock_To_flock_Flock(in, out, s); err != nil {
		return err
	}
	out.Spec = new(flock.FlockSpec)
	return Convert_v1alpha1_FlockSpec_To_flock_FlockSpec(&in.Spec, out.Spec, s)
}

// Convert_flock_Flock_To_v1alpha1_Flock converts an internal Flock to
// v1alpha1; a nil spec becomes an empty one.
func Convert_flock_Flock_To_v1alpha1_Flock(in *flock.Flock, out *Flock, s conversion.Scope) error {
	if err := autoConvert_flock_Flock_To_v1alpha1_Flock(in, out, s); err != nil {
		return err
	}
	if in.Spec == nil {
		out.Spec = FlockSpec{}
		return nil
	}
	return Convert_flock_FlockSpec_To_v1alpha1_FlockSpec(in.Spec, &out.Spec, s)
}
