// Package redact scrubs credentials out of Kubernetes objects and free text
// before they are written where others read them (kubectl estuary sysdump's
// archive).
//
// The caller should never read Secrets; what remains is a value that holds
// a credential inside an object that is collected: a BGP password in an
// annotation, a token in a container's env, a kubeconfig or a private key
// in a ConfigMap, an object copied whole into the last-applied-configuration
// annotation, or a token in a log line. Two rules, applied to every string:
//
//   - by name: a field, annotation, label, env var or ConfigMap key whose
//     name says credential (password, secret, token, private or API key,
//     client-key-data, ...) has its value replaced, unless the name says it
//     only refers to one (secretName, passwordSecretRef, tokenFile, ...) or
//     the value is a Secret's namespace/name under a name ending in secret
//     (--webhook-cert-secret=kube-system/estuary-webhook-cert);
//   - by content: PEM private key blocks, "Bearer" and "Basic" credentials,
//     JWTs (service account tokens), and `name: value` or `name=value` pairs
//     with a credential's name inside free text (a kubeconfig, a config
//     file, a log line). The whole value goes: a quoted one ("a b",
//     'x y', JSON's "with \"escapes\"", also across line breaks) to its
//     closing quote; a YAML block scalar (`password: |`, `>`, `|-`, `|+`)
//     or a value written on the lines below its key, all its lines
//     indented deeper than the key (the key's line becomes `name: REDACTED`);
//     an unquoted one to the first space, quote, comma, semicolon,
//     ampersand or closing bracket. A text is one document: callers pass a
//     file or a section whole, never a line at a time.
//
// A string that is a JSON object or array is parsed and redacted as an
// object. Redaction is idempotent and never drops a field, so the redacted
// object keeps its shape and what is not a credential stays readable.
package redact

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Redacted replaces every scrubbed value.
const Redacted = "REDACTED"

// credentialWords in a normalised name (lower case, letters and digits
// only) mark its value a credential.
var credentialWords = []string{
	"password", "passwd", "passphrase", "secret", "token", "credential", "apikey", "accesskey",
	"privatekey", "signingkey", "encryptionkey", "clientkeydata", "authorization", "bearer", "sessionkey",
}

// referenceSuffixes in a normalised name mean it names or points at a
// credential rather than holding it.
var referenceSuffixes = []string{"name", "names", "ref", "refs", "namespace", "file", "path", "dir", "seconds", "ttl", "audience", "audiences"}

// CredentialName reports whether a field, key or variable called name holds
// a credential.
func CredentialName(name string) bool {
	n := normaliseName(name)
	if n == "" {
		return false
	}
	for _, s := range referenceSuffixes {
		if strings.HasSuffix(n, s) {
			return false
		}
	}
	for _, w := range credentialWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	// tls.key, ca.key, ssh.key: a file name of a key.
	return strings.HasSuffix(strings.ToLower(name), ".key")
}

// namespacedName is a Secret's namespace/name.
var namespacedName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$`)

// secretReference reports whether value, under name, names a Secret
// (--webhook-cert-secret=kube-system/estuary-webhook-cert) rather than
// holding one: the name ends in "secret" and the value is a namespace/name.
func secretReference(name, value string) bool {
	return strings.HasSuffix(normaliseName(name), "secret") && namespacedName.MatchString(value)
}

func normaliseName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Object scrubs obj (an object as JSON decodes it) in place and
// returns how many values it replaced. A Secret's data goes entirely.
func Object(obj map[string]any) int {
	n := 0
	if obj["kind"] == "Secret" {
		for _, k := range []string{"data", "stringData"} {
			if m, ok := obj[k].(map[string]any); ok && len(m) == 0 {
				continue
			}
			if _, ok := obj[k]; ok {
				obj[k] = map[string]any{}
				n++
			}
		}
	}
	return n + redactMap(obj)
}

// redactValue scrubs v, named name where it sits, and returns it with the
// number of values replaced.
func redactValue(name string, v any) (any, int) {
	switch t := v.(type) {
	case map[string]any:
		return t, redactMap(t)
	case []any:
		n := 0
		for i := range t {
			var c int
			t[i], c = redactValue("", t[i])
			n += c
		}
		return t, n
	case string:
		if CredentialName(name) && t != "" && t != Redacted && !secretReference(name, t) {
			return Redacted, 1
		}
		return redactString(t)
	}
	return v, 0
}

// redactMap scrubs a map's values by their keys; a {name, value} pair (an
// env var) is judged by its name.
func redactMap(m map[string]any) int {
	n := 0
	if name, ok := m["name"].(string); ok && CredentialName(name) {
		if v, ok := m["value"].(string); ok && v != "" && v != Redacted {
			m["value"] = Redacted
			n++
		}
	}
	for k, v := range m {
		var c int
		m[k], c = redactValue(k, v)
		n += c
	}
	return n
}

// redactString scrubs a string value: as an object when it is JSON, else
// as text.
func redactString(s string) (string, int) {
	if t := strings.TrimSpace(s); len(t) > 1 && (t[0] == '{' || t[0] == '[') {
		var v any
		if err := json.Unmarshal([]byte(t), &v); err == nil {
			v, n := redactValue("", v)
			if n == 0 {
				return s, 0
			}
			if b, err := json.Marshal(v); err == nil {
				return string(b), n
			}
		}
	}
	return Text(s)
}

var (
	pemPrivateKey = regexp.MustCompile(`-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)`)
	authHeader    = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{8,})`)
	jwt           = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`)
	// namedValue is `name: value`, `name=value` or `"name":"value"`
	// where name holds a credential word, on one line; the value runs to
	// a space, quote, comma, semicolon, ampersand or closing bracket (a
	// quoted value is quotedValue's, a value on the next lines blockText's).
	namedValue = regexp.MustCompile(`(?i)(` + nameWithWord + `)(\\?["']?[ \t]*[:=][ \t]*\\?["']?)([^\s"'\\,;&}\])]+)`)
)

// maxPasses bounds Text's passes: a replacement can change what a quote
// or an indentation around it means, so Text runs again on its own output
// until nothing changes, which for any realistic text is the second pass.
const maxPasses = 8

// Text scrubs credentials out of free text and returns it with the
// number of values replaced. A multi-line text is one document: a
// credential's YAML block scalar or a quoted value spans lines.
func Text(s string) (string, int) {
	total := 0
	for range maxPasses {
		var n int
		if s, n = textPass(s); n == 0 {
			break
		}
		total += n
	}
	return s, total
}

// textPass is one pass of Text's rules over s.
func textPass(s string) (string, int) {
	n := 0
	s = blockText(s, &n)
	s = quotedText(s, &n)
	const pemRedacted = "-----BEGIN PRIVATE KEY----- " + Redacted + " -----END PRIVATE KEY-----"
	s = pemPrivateKey.ReplaceAllStringFunc(s, func(m string) string {
		if m != pemRedacted {
			n++
		}
		return pemRedacted
	})
	s = jwt.ReplaceAllStringFunc(s, func(string) string {
		n++
		return Redacted
	})
	s = authHeader.ReplaceAllStringFunc(s, func(m string) string {
		p := authHeader.FindStringSubmatch(m)
		if p[3] == Redacted {
			return m
		}
		n++
		return p[1] + p[2] + Redacted
	})
	s = namedValue.ReplaceAllStringFunc(s, func(m string) string {
		p := namedValue.FindStringSubmatch(m)
		if p[3] == Redacted || !CredentialName(p[1]) || secretReference(p[1], p[3]) {
			return m
		}
		n++
		return p[1] + p[2] + Redacted
	})
	return s, n
}
