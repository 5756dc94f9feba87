package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTextBlockScalars: a credential written as a YAML block scalar, in
// any of its styles, loses its whole indented body; the keys around it
// stay.
func TestTextBlockScalars(t *testing.T) {
	for _, indicator := range []string{"|", ">", "|-", "|+", ">-", "|2", "| # the key"} {
		in := "bgp:\n  password: " + indicator + "\n    first " + leak + "\n\n    second line " + leak + "\n  peer: 10.0.0.1\nnext: x\n"
		got, n := Text(in)
		if strings.Contains(got, leak) || n != 1 {
			t.Errorf("indicator %q: Text = %q (%d replaced), want the body gone", indicator, got, n)
		}
		if want := "bgp:\n  password: " + Redacted + "\n  peer: 10.0.0.1\nnext: x\n"; got != want {
			t.Errorf("indicator %q: Text = %q, want %q", indicator, got, want)
		}
		if again, m := Text(got); again != got || m != 0 {
			t.Errorf("indicator %q: not idempotent: %q (%d)", indicator, again, m)
		}
	}
	// In a sequence item, the item's sibling keys are not the value.
	in := "users:\n- token: |\n    " + leak + "\n  name: admin\n"
	if got, _ := Text(in); got != "users:\n- token: "+Redacted+"\n  name: admin\n" {
		t.Errorf("sequence item: Text = %q", got)
	}
	// A value on the next line, plain or quoted, is the key's value too.
	for _, in := range []string{"password:\n  " + leak + " more words\n", "password:\n  \"" + leak + " more\"\n", "'secret':\r\n  " + leak + "\r\n"} {
		if got, n := Text(in); strings.Contains(got, leak) || strings.Contains(got, "more") || n != 1 {
			t.Errorf("next-line value: Text(%q) = %q (%d)", in, got, n)
		}
	}
}

// TestTextQuotedValues: a quoted credential loses everything up to its
// closing quote (spaces, escaped quotes, line breaks), in YAML, logfmt,
// shell and JSON (also JSON quoted inside a log message).
func TestTextQuotedValues(t *testing.T) {
	for _, in := range []string{
		`token: "a b ` + leak + ` c"`,
		`secret='x y ` + leak + `'`,
		`secret: 'it''s ` + leak + `'`,
		`{"password": "with spaces ` + leak + `"}`,
		`{"password":"esc \" quote ` + leak + `"}`,
		`level=info msg="{\"token\":\"a b ` + leak + `\"}"`,
		"password: \"first line\n  " + leak + "\"",
		`API_KEY = "k ` + leak + `"`,
	} {
		got, n := Text(in)
		if strings.Contains(got, leak) || n != 1 {
			t.Errorf("Text(%q) = %q (%d replaced), want the whole value gone", in, got, n)
		}
		if again, m := Text(got); again != got || m != 0 {
			t.Errorf("Text is not idempotent on %q: %q (%d)", got, again, m)
		}
	}
	if got, _ := Text(`password: "a b", user: "bob"`); got != `password: "`+Redacted+`", user: "bob"` {
		t.Errorf("the value after a quoted credential was touched: %q", got)
	}
	for _, in := range []string{
		`secretName: "estuary webhook"`,
		`webhook-cert-secret: "kube-system/estuary-webhook-cert"`,
		`msg="token refreshed" user="bob smith"`,
	} {
		if got, n := Text(in); got != in || n != 0 {
			t.Errorf("Text changed a line with no credential: %q -> %q", in, got)
		}
	}
}

// TestTextNestedMappingIsNotAValue: a credential-named key whose value is a
// mapping below it is left to the rules for its own keys.
func TestTextNestedMappingIsNotAValue(t *testing.T) {
	in := "secrets:\n  ca-name: estuary-ca\n  password: |\n    " + leak + "\nother: 1\n"
	got, n := Text(in)
	if want := "secrets:\n  ca-name: estuary-ca\n  password: " + Redacted + "\nother: 1\n"; got != want || n != 1 {
		t.Fatalf("Text = %q (%d), want %q", got, n, want)
	}
}

// FuzzTextValueForms: a credential of any content, written as a YAML
// block scalar, a double- or single-quoted value, or a JSON string, never
// survives redaction (but a Secret's namespace/name under a name ending in
// secret, which names one), and redaction is idempotent.
func FuzzTextValueForms(f *testing.F) {
	f.Add("a b c "+leak, uint8(0))
	f.Add(leak+"\nsecond \"line\"", uint8(1))
	f.Add("it's "+leak, uint8(2))
	f.Add("x\\y \""+leak, uint8(3))
	f.Fuzz(func(t *testing.T, secret string, form uint8) {
		secret = strings.ReplaceAll(secret, "\r", "")
		if len(secret) > 1024 || strings.TrimSpace(secret) == "" || strings.Contains(secret, Redacted) || secretReference("client-secret", secret) {
			return
		}
		enc := encodeValue(secret, form%4)
		const head, tail = "kind: Config\nusers:\n- name: admin\n  user:\n", "\n    username: admin\ncurrent: x\n"
		var value string
		switch form % 4 {
		case 0:
			value = "    password: |\n" + enc
		case 1:
			value = "    token: " + enc
		case 2:
			value = "    client-secret: " + enc
		case 3:
			value = `    auth: {"apiKey": ` + enc + `}`
		}
		in := head + value + tail
		got, _ := Text(in)
		if again, n := Text(got); again != got || n != 0 {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, got, again)
		}
		for _, l := range strings.Split(enc, "\n") {
			if l = strings.TrimSpace(l); len(l) >= 6 && strings.Contains(got, l) && !strings.Contains(head+tail, l) {
				t.Fatalf("credential survived: %q -> %q", in, got)
			}
		}
	})
}

// encodeValue writes secret as a YAML block scalar body (0), a
// double-quoted YAML/JSON string (1, 3) or a single-quoted YAML string (2).
func encodeValue(secret string, form uint8) string {
	switch form {
	case 0:
		return "      " + strings.ReplaceAll(secret, "\n", "\n      ")
	case 2:
		return "'" + strings.ReplaceAll(secret, "'", "''") + "'"
	}
	b, _ := json.Marshal(secret)
	return string(b)
}
