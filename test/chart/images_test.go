package chart

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// renderedImages returns the manager's and the daemon's image as rendered.
func renderedImages(t *testing.T, objs []*unstructured.Unstructured) (manager, daemon string) {
	t.Helper()
	var d appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "estuary-manager"), &d)
	var ds appsv1.DaemonSet
	convert(t, find(t, objs, "DaemonSet", "estuary-daemon"), &ds)
	return d.Spec.Template.Spec.Containers[0].Image, ds.Spec.Template.Spec.Containers[0].Image
}

// testDigest is an image manifest digest.
const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestImageRegistry: both images are <imageRegistry>/<name>:<appVersion>
// unless a repository or tag of their own is set, and
// <repository>@<digest> when a digest is; the workloads carry the
// appVersion as app.kubernetes.io/version (kubectl estuary version reads it).
func TestImageRegistry(t *testing.T) {
	for _, c := range []struct {
		set             []string
		manager, daemon string
	}{
		{nil, "estuary.local/estuary-manager:0.1.0", "estuary.local/estuary-daemon:0.1.0"},
		{[]string{"--set", "imageRegistry=registry.example:5000/estuary/"},
			"registry.example:5000/estuary/estuary-manager:0.1.0", "registry.example:5000/estuary/estuary-daemon:0.1.0"},
		{[]string{"--set", "imageRegistry=r.example,manager.image.repository=mirror.example/m,daemon.image.tag=0.1.1"},
			"mirror.example/m:0.1.0", "r.example/estuary-daemon:0.1.1"},
		// A digest (a released chart's) wins over the tag.
		{[]string{"--set", "manager.image.digest=" + testDigest + ",daemon.image.tag=0.1.1,daemon.image.digest=" + testDigest},
			"estuary.local/estuary-manager@" + testDigest, "estuary.local/estuary-daemon@" + testDigest},
	} {
		objs := render(t, c.set...)
		m, d := renderedImages(t, objs)
		if m != c.manager || d != c.daemon {
			t.Errorf("%v: images %s, %s; want %s, %s", c.set, m, d, c.manager, c.daemon)
		}
		for _, w := range []string{"Deployment/estuary-manager", "DaemonSet/estuary-daemon"} {
			kind, name, _ := strings.Cut(w, "/")
			if v := find(t, objs, kind, name).GetLabels()["app.kubernetes.io/version"]; v != "0.1.0" {
				t.Errorf("%v: %s app.kubernetes.io/version %q, want the appVersion 0.1.0", c.set, w, v)
			}
		}
	}
}
