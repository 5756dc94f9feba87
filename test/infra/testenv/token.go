package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServiceAccountToken creates the ServiceAccount namespace/name unless it
// exists and returns a token of it from the TokenRequest API, valid for an
// hour: what a scraper's bearer token is.
func ServiceAccountToken(ctx context.Context, c client.Client, namespace, name string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create service account %s/%s: %w", namespace, name, err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("token of service account %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// BindClusterRole binds the ClusterRole role to the ServiceAccount
// namespace/sa with a ClusterRoleBinding named after both, unless it exists.
func BindClusterRole(ctx context.Context, c client.Client, role, namespace, sa string) error {
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role + "-" + namespace + "-" + sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: sa}},
	}
	if err := c.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind cluster role %s to %s/%s: %w", role, namespace, sa, err)
	}
	return nil
}

// MetricsReaderToken returns a token of the ServiceAccount namespace/name
// allowed get on the non-resource URL /metrics, what the chart's
// estuary-metrics-reader grants: it creates a ClusterRole of that one rule,
// named role, and binds it.
func MetricsReaderToken(ctx context.Context, c client.Client, role, namespace, name string) (string, error) {
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if err := c.Create(ctx, cr); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create cluster role %s: %w", role, err)
	}
	if err := BindClusterRole(ctx, c, role, namespace, name); err != nil {
		return "", err
	}
	return ServiceAccountToken(ctx, c, namespace, name)
}

// Scrape GETs url over HTTPS without verifying the server's certificate
// (estuary's metrics endpoints serve a self-signed one), with token as the
// bearer token unless it is empty, and returns the status and body.
func Scrape(ctx context.Context, url, token string) (int, string, error) {
	return ScrapeTLS(ctx, url, token, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // G402: the endpoints' certificates are self-signed
}

// ScrapeTLS is Scrape with the client's TLS configuration: a scraper that
// verifies the endpoint (RootCAs, ServerName).
func ScrapeTLS(ctx context.Context, url, token string, tc *tls.Config) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", fmt.Errorf("read %s: %w", url, err)
	}
	return resp.StatusCode, string(body), nil
}
