package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

const leak = "hunter2-S3cr3t-value"

// TestObjectScrubsCredentialsAndKeepsTheRest: every place a
// credential shows up in objects sysdump collects is scrubbed, and names,
// references and ordinary values stay as they were.
func TestObjectScrubsCredentialsAndKeepsTheRest(t *testing.T) {
	lastApplied := `{"apiVersion":"v1","kind":"ConfigMap","data":{"bgp-password":"` + leak + `","mode":"fast"}}`
	obj := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{
			"name": "estuary-manager",
			"annotations": map[string]any{
				"networking.estuary.io/bgp-password":               leak,
				"kubectl.kubernetes.io/last-applied-configuration": lastApplied,
				"description": "a note",
			},
		},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{
				"name": "manager",
				"args": []any{"--leader-elect", "--token=" + leak},
				"env": []any{
					map[string]any{"name": "API_TOKEN", "value": leak},
					map[string]any{"name": "NODE_NAME", "value": "node-1"},
					map[string]any{"name": "BGP_PASSWORD", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "bgp", "key": "password"}}},
				},
			}},
			"volumes": []any{map[string]any{"name": "cert", "secret": map[string]any{"secretName": "estuary-webhook-cert"}}},
		}}},
		"data": map[string]any{
			"kubeconfig": "users:\n- name: admin\n  user:\n    token: " + leak + "\n    client-key-data: " + leak + "\n",
			"tls.key":    leak,
			"key.pem":    "-----BEGIN RSA PRIVATE KEY-----\n" + leak + "\n-----END RSA PRIVATE KEY-----\n",
			"probe":      "curl -H 'Authorization: Bearer " + leak + "' http://x",
			"jwt":        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
		},
	}
	n := Object(obj)
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	if strings.Contains(out, leak) || strings.Contains(out, "eyJzdWIiOiJ4In0") {
		t.Fatalf("a credential survived redaction:\n%s", out)
	}
	if n < 9 {
		t.Errorf("Object replaced %d values, want at least 9 (annotation, last-applied, arg, env, kubeconfig token and key, tls.key, PEM, bearer, jwt)", n)
	}
	for _, kept := range []string{`"estuary-manager"`, `"node-1"`, `"a note"`, `"--leader-elect"`, `"secretName":"estuary-webhook-cert"`,
		`"key":"password"`, `"name":"bgp"`, `"name":"API_TOKEN"`, `\"mode\":\"fast\"`, "http://x"} {
		if !strings.Contains(out, kept) {
			t.Errorf("redaction lost %s:\n%s", kept, out)
		}
	}
	if again := Object(obj); again != 0 {
		t.Errorf("a second redaction replaced %d values, want 0", again)
	}
}

func TestObjectEmptiesASecret(t *testing.T) {
	s := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "x"},
		"data": map[string]any{"anything": "aHVudGVyMg=="}, "stringData": map[string]any{"plain": "hunter2"}}
	Object(s)
	b, _ := json.Marshal(s)
	if strings.Contains(string(b), "aHVudGVyMg==") || strings.Contains(string(b), "hunter2") {
		t.Fatalf("a Secret kept its data: %s", b)
	}
}

func TestCredentialName(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "bgpPassword": true, "BGP_PASSWORD": true, "networking.estuary.io/bgp-password": true,
		"token": true, "client-key-data": true, "tls.key": true, "apiKey": true, "secret": true, "privateKey": true,
		"passwordSecretRef": false, "secretName": false, "tokenFile": false, "expirationSeconds": false, "key": false,
		"topologyKey": false, "name": false, "tokenPath": false, "serviceAccountName": false, "": false,
	} {
		if got := CredentialName(name); got != want {
			t.Errorf("CredentialName(%q) = %t, want %t", name, got, want)
		}
	}
}

func TestTextInLogsAndConfigs(t *testing.T) {
	for _, in := range []string{
		`level=info msg="peer up" password=` + leak,
		`{"level":"info","bgpPassword":"` + leak + `"}`,
		"Authorization: Basic " + leak,
		"token: " + leak,
		"client-secret=" + leak,
		"--bgp-secret=Kube/System",
		"-----BEGIN PRIVATE KEY-----\n" + leak + "\n",
	} {
		got, n := Text(in)
		if strings.Contains(got, leak) || n == 0 {
			t.Errorf("Text(%q) = %q (%d replaced)", in, got, n)
		}
		if again, m := Text(got); again != got || m != 0 {
			t.Errorf("Text is not idempotent on %q: %q (%d)", got, again, m)
		}
	}
	for _, in := range []string{
		"2024-01-01T00:00:00Z reconciled subnet overlay-v4 (used 12 of 254)",
		"table 1000 ipv4 10.244.0.5 dev est1234 proto estuary scope link",
		"tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
		"--webhook-cert-secret=kube-system/estuary-webhook-cert",
	} {
		if got, n := Text(in); got != in || n != 0 {
			t.Errorf("Text changed a line with no credential: %q -> %q", in, got)
		}
	}
}

// FuzzObject: on any JSON object redaction keeps valid JSON, is
// idempotent, and leaves no non-empty string under a credential's name
// but a Secret's namespace/name.
func FuzzObject(f *testing.F) {
	f.Add(`{"kind":"Secret","data":{"a":"b"}}`)
	f.Add(`{"metadata":{"annotations":{"x/password":"p","last":"{\"token\":\"t\"}"}}}`)
	f.Add(`{"env":[{"name":"DB_PASSWORD","value":"v"}],"args":["--token=abc"]}`)
	f.Add(`{"data":{"kubeconfig":"token: abc\nclient-key-data: xyz"}}`)
	f.Fuzz(func(t *testing.T, in string) {
		var obj map[string]any
		if json.Unmarshal([]byte(in), &obj) != nil || obj == nil {
			return
		}
		Object(obj)
		once, err := json.Marshal(obj)
		if err != nil {
			t.Fatalf("redacted object does not marshal: %v", err)
		}
		if n := Object(obj); n != 0 {
			t.Fatalf("second redaction replaced %d values of %s", n, once)
		}
		assertNoNamedCredential(t, "", obj)
	})
}

func assertNoNamedCredential(t *testing.T, name string, v any) {
	switch x := v.(type) {
	case map[string]any:
		if n, ok := x["name"].(string); ok && CredentialName(n) {
			if s, ok := x["value"].(string); ok && s != "" && s != Redacted {
				t.Fatalf("env-like {name: %q} kept value %q", n, s)
			}
		}
		for k, c := range x {
			assertNoNamedCredential(t, k, c)
		}
	case []any:
		for _, c := range x {
			assertNoNamedCredential(t, "", c)
		}
	case string:
		if CredentialName(name) && x != "" && x != Redacted && !secretReference(name, x) {
			t.Fatalf("%q kept value %q", name, x)
		}
	}
}

// FuzzText: redacting text is idempotent and a credential named in a
// `name: value` pair never survives, whatever surrounds it.
func FuzzText(f *testing.F) {
	f.Add("before ", "after")
	f.Add("{\"x\":", "}")
	f.Add("", "\n")
	f.Fuzz(func(t *testing.T, before, after string) {
		in := before + " password: " + leak + " " + after
		got, _ := Text(in)
		if again, n := Text(got); again != got || n != 0 {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, got, again)
		}
		if strings.Contains(got, leak) && !strings.Contains(before+after, leak) {
			t.Fatalf("credential survived: %q -> %q", in, got)
		}
	})
}
