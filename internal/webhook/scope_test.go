package webhook

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// TestScopedConfig: the rotator's lists and watches of its Secret's
// namespace and of the webhook configurations name the one object; other
// requests pass unchanged.
func TestScopedConfig(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.Path+"?"+r.URL.Query().Get("fieldSelector"))
	}))
	defer srv.Close()
	cfg := scopedConfig(&rest.Config{Host: srv.URL}, CertRotation{
		Secret: types.NamespacedName{Namespace: "ns", Name: "cert"}, Configuration: "hooks"})
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"/api/v1/namespaces/ns/secrets?watch=true", "/api/v1/namespaces/ns/secrets?fieldSelector=type%3DOpaque",
		"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
		"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", "/api/v1/namespaces/other/secrets",
		"/api/v1/namespaces/ns/secrets/cert",
	} {
		resp, err := hc.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	want := []string{
		"/api/v1/namespaces/ns/secrets?metadata.name=cert", "/api/v1/namespaces/ns/secrets?type=Opaque,metadata.name=cert",
		"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations?metadata.name=hooks",
		"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations?metadata.name=hooks",
		"/api/v1/namespaces/other/secrets?", "/api/v1/namespaces/ns/secrets/cert?",
	}
	if !slices.Equal(got, want) {
		t.Errorf("requests\n%v\nwant\n%v", got, want)
	}
}
