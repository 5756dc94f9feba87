package datapath

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/estuary-cni/estuary/internal/policytranslate"
)

// TestPolicyReadListsEveryPodOnlyWhenAPolicyExists: without a policy the
// part reads the pods of the node's endpoints alone; once a NetworkPolicy
// exists, every pod (the peers).
func TestPolicyReadListsEveryPodOnlyWhenAPolicyExists(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name}}
	}
	podLists := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod("local"), pod("remote-1"), pod("remote-2")).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
			if _, ok := l.(*corev1.PodList); ok {
				podLists++
			}
			return c.List(ctx, l, o...)
		}}).Build()
	part := NewPolicyPart(PolicyConfig{Reader: c}, nil)
	eps := []policytranslate.PolicyEndpoint{
		{HostVeth: "veth1", Namespace: "tenant", Name: "local"},
		{HostVeth: "veth2", Namespace: "tenant", Name: "gone"},
	}
	ctx := context.Background()

	in, err := part.read(ctx, eps)
	if err != nil {
		t.Fatal(err)
	}
	if podLists != 0 || len(in.Pods) != 1 || in.Pods[0].Name != "local" {
		t.Fatalf("without a policy: %d pod lists, pods %v; want none listed and the endpoint's pod alone", podLists, names(in.Pods))
	}

	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "deny"}}
	if err := c.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	if in, err = part.read(ctx, eps); err != nil {
		t.Fatal(err)
	}
	if podLists != 1 || len(in.Pods) != 3 || len(in.NetworkPolicies) != 1 {
		t.Fatalf("with a policy: %d pod lists, pods %v, %d policies; want every pod listed once", podLists, names(in.Pods), len(in.NetworkPolicies))
	}
}

func names(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}
