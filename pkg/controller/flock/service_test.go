package flock

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestServicePorts(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "init", Ports: []corev1.ContainerPort{{ContainerPort: 1}}}, // not a sidecar: no port
			{Name: "sidecar", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100}}},
		},
		Containers: []corev1.Container{
			{Name: "a", Ports: []corev1.ContainerPort{
				{Name: "pg", ContainerPort: 5432},
				{ContainerPort: 8008, Protocol: corev1.ProtocolTCP},
				{ContainerPort: 8008, Protocol: corev1.ProtocolUDP},
			}},
			{Name: "b", Ports: []corev1.ContainerPort{
				{Name: "pg", ContainerPort: 5433},    // name taken
				{Name: "again", ContainerPort: 5432}, // duplicate port
			}},
		},
	}
	want := []corev1.ServicePort{
		{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9100, TargetPort: intstr.FromInt32(9100)},
		{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432, TargetPort: intstr.FromInt32(5432)},
		{Name: "tcp-8008", Protocol: corev1.ProtocolTCP, Port: 8008, TargetPort: intstr.FromInt32(8008)},
		{Name: "udp-8008", Protocol: corev1.ProtocolUDP, Port: 8008, TargetPort: intstr.FromInt32(8008)},
		{Name: "tcp-5433", Protocol: corev1.ProtocolTCP, Port: 5433, TargetPort: intstr.FromInt32(5433)},
	}
	if got := ServicePorts(spec); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("ServicePorts =\n%+v\nwant\n%+v", got, want)
	}
	single := &corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}
	if got := ServicePorts(single); len(got) != 1 || got[0].Name != "" {
		t.Errorf("a single unnamed port = %+v, want it unnamed", got)
	}
	if got := ServicePorts(&corev1.PodSpec{}); got != nil {
		t.Errorf("no ports = %+v", got)
	}
}
