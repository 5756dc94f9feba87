package daemon

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPolicyPodTransformKeepsWhatPolicyReads: the cached Pod keeps its
// name, labels, host network, node, named ports (of containers and of
// sidecar init containers) and addresses, and loses the rest.
func TestPolicyPodTransformKeepsWhatPolicyReads(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u", Labels: map[string]string{"app": "a"},
			Annotations: map[string]string{"big": "value"}},
		Spec: corev1.PodSpec{NodeName: "n1", HostNetwork: false,
			InitContainers: []corev1.Container{{Name: "init", Image: "i"}, {Name: "side", Image: "i", Ports: ports, RestartPolicy: &always}},
			Containers:     []corev1.Container{{Name: "c", Image: "i", Env: []corev1.EnvVar{{Name: "X", Value: "y"}}, Ports: ports}, {Name: "d", Image: "i"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5", PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
	}
	got, err := policyPodTransform(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{NodeName: "n1",
			InitContainers: []corev1.Container{{Name: "side", Ports: ports, RestartPolicy: &always}},
			Containers:     []corev1.Container{{Name: "c", Ports: ports}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5", PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("transformed pod\n%+v\nwant\n%+v", got, want)
	}
	if other, _ := policyPodTransform("not a pod"); other != "not a pod" {
		t.Errorf("a non-pod changed: %v", other)
	}
}
