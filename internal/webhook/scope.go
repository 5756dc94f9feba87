package webhook

import (
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// scopedManager is the manager as the certificate rotator sees it: its own
// cache (built from GetConfig) lists and watches the whole collections of
// Secrets in the Secret's namespace and of webhook configurations, which
// would need list and watch on every Secret there. Through config every such
// list and watch names the one object the rotator reads, with a
// metadata.name field selector, so that RBAC can grant list and watch on
// that object alone (resourceNames), as it grants get and update.
type scopedManager struct {
	manager.Manager
	config *rest.Config
}

// GetConfig returns the name-scoped config.
func (m scopedManager) GetConfig() *rest.Config { return m.config }

// scopedConfig copies cfg with a transport that adds a metadata.name field
// selector to list and watch requests for the collections the rotator
// caches: the Secrets of c.Secret's namespace and the validating and
// mutating webhook configurations.
func scopedConfig(cfg *rest.Config, c CertRotation) *rest.Config {
	return nameScopedConfig(cfg, map[string]string{
		"/api/v1/namespaces/" + c.Secret.Namespace + "/secrets":                 c.Secret.Name,
		"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations": c.Configuration,
		"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations":   c.Configuration,
	})
}

// NameScopedManager is mgr as another certificate rotator sees it: every
// list and watch of a collection names maps (its path, e.g.
// /api/v1/namespaces/ns/secrets) names the one object mapped to it, so RBAC
// can grant them by resourceNames.
func NameScopedManager(mgr manager.Manager, names map[string]string) manager.Manager {
	return scopedManager{Manager: mgr, config: nameScopedConfig(mgr.GetConfig(), names)}
}

// nameScopedConfig copies cfg with a transport that adds a metadata.name
// field selector to list and watch requests for the collections of names.
func nameScopedConfig(cfg *rest.Config, names map[string]string) *rest.Config {
	out := rest.CopyConfig(cfg)
	wrap := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		return nameScope{next: rt, names: names}
	}
	return out
}

// nameScope is the RoundTripper of scopedConfig.
type nameScope struct {
	next  http.RoundTripper
	names map[string]string // collection path: the object's name
}

func (s nameScope) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return s.next.RoundTrip(req)
	}
	name, ok := s.names[strings.TrimSuffix(req.URL.Path, "/")]
	if !ok {
		return s.next.RoundTrip(req)
	}
	q := req.URL.Query()
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	if have := q.Get("fieldSelector"); have != "" {
		sel = have + "," + sel
	}
	q.Set("fieldSelector", sel)
	scoped := req.Clone(req.Context())
	scoped.URL = cloneURL(req.URL)
	scoped.URL.RawQuery = q.Encode()
	return s.next.RoundTrip(scoped)
}

func cloneURL(u *url.URL) *url.URL {
	c := *u
	return &c
}
