// File service.go: the headless Service: building it from a Flock, and keeping it
// (create, adopt an orphan of ours, fix selector and ports, report conflicts).

package flock

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// ServiceSelector returns the selector of a Flock's headless Service: the
// matchLabels of spec.selector plus flock.dev/name=<flock>, so it selects
// exactly the Flock's member pods.
func ServiceSelector(f *v1alpha1.Flock) map[string]string {
	sel := map[string]string{}
	if f.Spec.Selector != nil {
		maps.Copy(sel, f.Spec.Selector.MatchLabels)
	}
	sel[v1alpha1.LabelFlockName] = f.Name
	return sel
}

// NewService returns the headless Service of Flock f: named
// spec.serviceName, clusterIP None, publishing not-ready addresses (a
// member's DNS name must resolve before it is Ready, so peers can find each
// other while they start), selecting the Flock's pods, with the ports of the
// template's containers, owned by f.
func NewService(f *v1alpha1.Flock) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            serviceNameOf(f),
			Namespace:       f.Namespace,
			Labels:          map[string]string{v1alpha1.LabelFlockName: f.Name},
			OwnerReferences: []metav1.OwnerReference{*newControllerRef(f)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 ServiceSelector(f),
			Ports:                    ServicePorts(&f.Spec.Template.Spec),
		},
	}
}

// ServicePorts returns the Service ports for the container ports of a pod
// spec (containers and restartable init containers, i.e. sidecars), one per
// distinct port and protocol, in order of appearance. A port keeps its
// container port name when that name is free; otherwise, and when it has
// none and there are several ports, it is named <protocol>-<port>.
func ServicePorts(spec *corev1.PodSpec) []corev1.ServicePort {
	var cps []corev1.ContainerPort
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			cps = append(cps, c.Ports...)
		}
	}
	for _, c := range spec.Containers {
		cps = append(cps, c.Ports...)
	}

	type key struct {
		port  int32
		proto corev1.Protocol
	}
	seen := map[key]bool{}
	var unique []corev1.ContainerPort
	for _, cp := range cps {
		if cp.Protocol == "" {
			cp.Protocol = corev1.ProtocolTCP
		}
		k := key{cp.ContainerPort, cp.Protocol}
		if cp.ContainerPort <= 0 || seen[k] {
			continue
		}
		seen[k] = true
		unique = append(unique, cp)
	}

	names := map[string]bool{}
	ports := make([]corev1.ServicePort, 0, len(unique))
	for _, cp := range unique {
		name := cp.Name
		if name == "" && len(unique) > 1 || names[name] {
			name = strings.ToLower(string(cp.Protocol)) + "-" + strconv.FormatInt(int64(cp.ContainerPort), 10)
		}
		names[name] = true
		ports = append(ports, corev1.ServicePort{
			Name:       name,
			Protocol:   cp.Protocol,
			Port:       cp.ContainerPort,
			TargetPort: intstr.FromInt32(cp.ContainerPort),
		})
	}
	if len(ports) == 0 {
		return nil
	}
	return ports
}

// syncService keeps the Flock's headless Service and returns the
// ServiceReady condition. A Service of that name that the Flock does not
// control is never modified; the one exception is an orphan the controller
// made for this Flock (labelled flock.dev/name=<flock>, headless), which is
// adopted back. A Flock that is being deleted, or whose namespace is
// (frozen), only has its Service's state reported. A missing Service is made
// only when needed, once the Flock has or is to have members: over no pods
// it would publish no name, yet cost kube-apiserver four writes (the
// Service, kube-controller-manager's Endpoints and EndpointSlice, the event).
func (fc *defaultFlockControl) syncService(ctx context.Context, f *v1alpha1.Flock, rm *refManager, frozen, needed bool) (metav1.Condition, error) {
	logger := klog.FromContext(ctx)
	name := serviceNameOf(f)

	svc, err := fc.members.GetService(f.Namespace, name)
	switch {
	case apierrors.IsNotFound(err) && !needed:
		return serviceCond(metav1.ConditionTrue, ReasonServiceNotNeeded, "no members: headless Service %s is made with the first", name), nil
	case apierrors.IsNotFound(err):
		if frozen {
			return serviceCond(metav1.ConditionFalse, ReasonServiceMissing, "Service %s does not exist", name), nil
		}
		if err := fc.members.CreateService(ctx, NewService(f)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// The cache is behind; the Service's event brings us back.
				return metav1.Condition{}, nil
			}
			if failureToTell(ctx, err, f) {
				fc.event(f, corev1.EventTypeWarning, "FailedCreate", "create Service %s failed: %v", name, err)
			}
			return serviceCond(metav1.ConditionFalse, ReasonServiceMissing, "creating Service %s failed: %v", name, err), err
		}
		logger.V(2).Info("Created headless Service", "service", klog.KRef(f.Namespace, name))
		fc.event(f, corev1.EventTypeNormal, "SuccessfulCreate", "created headless Service %s", name)
		// It was made from the Flock as it is: it selects the members, as
		// the next sync would find, and saying so now saves the Flock a
		// status write.
		return serviceReady(name), nil
	case err != nil:
		return metav1.Condition{}, err
	}

	ref := metav1.GetControllerOfNoCopy(svc)
	if ref == nil && svc.Labels[v1alpha1.LabelFlockName] == f.Name && svc.Spec.ClusterIP == corev1.ClusterIPNone && !frozen {
		if err := rm.adoptService(ctx, svc); err != nil {
			return metav1.Condition{}, err
		}
		fc.event(f, corev1.EventTypeNormal, "AdoptedService", "adopted orphaned headless Service %s", name)
		svc = svc.DeepCopy()
		svc.OwnerReferences = append(svc.OwnerReferences, *newControllerRef(f))
		ref = newControllerRef(f)
	}
	if ref == nil || ref.UID != f.UID {
		c := serviceCond(metav1.ConditionFalse, ReasonServiceNotOwned,
			"Service %s exists and is not controlled by this Flock; it is left as it is, so member DNS names may not resolve", name)
		fc.eventOnTransition(f, c, corev1.EventTypeWarning, "ServiceConflict")
		return c, nil
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		c := serviceCond(metav1.ConditionFalse, ReasonServiceNotHeadless,
			"Service %s is not headless (clusterIP %s), so members get no DNS names; delete it to have it recreated", name, svc.Spec.ClusterIP)
		fc.eventOnTransition(f, c, corev1.EventTypeWarning, "ServiceConflict")
		return c, nil
	}
	if !frozen {
		want := NewService(f)
		if !equality.Semantic.DeepEqual(svc.Spec.Selector, want.Spec.Selector) ||
			!equality.Semantic.DeepEqual(svc.Spec.Ports, want.Spec.Ports) ||
			svc.Spec.PublishNotReadyAddresses != want.Spec.PublishNotReadyAddresses {
			upd := svc.DeepCopy()
			upd.Spec.Selector = want.Spec.Selector
			upd.Spec.Ports = want.Spec.Ports
			upd.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
			if err := fc.members.UpdateService(ctx, upd); err != nil {
				return metav1.Condition{}, fmt.Errorf("updating Service %s/%s: %w", f.Namespace, name, err)
			}
			fc.event(f, corev1.EventTypeNormal, "SuccessfulUpdate", "updated the selector and ports of headless Service %s", name)
		}
	}
	return serviceReady(name), nil
}

// serviceCond is a ServiceReady condition.
func serviceCond(s metav1.ConditionStatus, reason, format string, args ...any) metav1.Condition {
	return metav1.Condition{Type: v1alpha1.FlockServiceReady, Status: s, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// serviceReady is the ServiceReady condition of a Flock whose headless
// Service name selects its members.
func serviceReady(name string) metav1.Condition {
	return serviceCond(metav1.ConditionTrue, ReasonServiceReady, "headless Service %s selects the members", name)
}
