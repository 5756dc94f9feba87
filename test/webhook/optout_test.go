package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/webhook"
)

// A pod labelled networking.estuary.io/webhook=disabled, or with
// hybridnet's webhook.hybridnet.io/ignore=true, is never sent to the pod
// webhooks by the API server (the configurations' objectSelector): a
// selection the validating webhook denies is stored, and a pod of an
// Underlay network gets no domain affinity, while the same pod without the
// label is denied, or mutated.
func TestOptOutLabelSkipsPodWebhooks(t *testing.T) {
	seed(t, hybridnetFixture()...)
	optOuts := map[string]map[string]string{
		"estuary label":   {estuaryv1.LabelWebhook: estuaryv1.WebhookDisabled},
		"hybridnet label": {webhook.HybridnetIgnoreLabel: "true"},
		"hybridnet TRUE":  {webhook.HybridnetIgnoreLabel: "TRUE"},
	}
	requireDenied(t, k8s.Create(ctx(t), podObj("default", "in-bad", sel(annNet, "nope"))),
		`admission webhook "pod.validate.estuary.io" denied the request`, `network "nope"`)
	in := podObj("default", "in-u", sel(annNet, "hn-u"))
	create(t, in)
	if got := stored(t, in); got.Spec.Affinity == nil {
		t.Fatal("a pod of hn-u without the opt-out label got no affinity: the webhook did not run, so the test proves nothing")
	}
	for name, lbls := range optOuts {
		t.Run(name, func(t *testing.T) {
			bad := podObj("default", "out-bad", sel(annNet, "nope"), labelled(lbls))
			create(t, bad)
			u := podObj("default", "out-u", sel(annNet, "hn-u"), labelled(lbls))
			create(t, u)
			if got := stored(t, u); got.Spec.Affinity != nil {
				t.Errorf("opted-out pod of hn-u got affinity %s", affinityString(got.Spec.Affinity))
			}
		})
	}
	t.Run("other values do not opt out", func(t *testing.T) {
		for i, lbls := range []map[string]string{
			{estuaryv1.LabelWebhook: "enabled"}, {webhook.HybridnetIgnoreLabel: "false"}, {webhook.HybridnetIgnoreLabel: "True"},
		} {
			p := podObj("default", "still-in", sel(annNet, "nope"), labelled(lbls))
			if err := k8s.Create(ctx(t), p); err == nil {
				t.Errorf("case %d: pod labelled %v with a missing network was admitted", i, lbls)
				_ = k8s.Delete(ctx(t), p)
			}
		}
	})
}

// stored reads obj back from the API server.
func stored(t *testing.T, obj *corev1.Pod) *corev1.Pod {
	t.Helper()
	got := &corev1.Pod{}
	if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	return got
}
