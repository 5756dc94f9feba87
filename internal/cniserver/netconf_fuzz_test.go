package cniserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzParseNetConf: parseNetConf, which reads the network configuration of
// every CNI request (a pod's bandwidth annotations reach it as
// runtimeConfig.bandwidth), never panics; it gives the zero value for what
// is not a JSON object of the expected types, and otherwise a value that
// encodes to JSON it reads back the same, whose name networkName gives and
// which is shaped exactly when it carries a positive rate.
func FuzzParseNetConf(f *testing.F) {
	for _, s := range []string{
		`{"cniVersion":"1.0.0","name":"estuary","type":"estuary-cni"}`,
		`{"name":"estuary","runtimeConfig":{"bandwidth":{"ingressRate":1000000,"egressRate":0,"ingressBurst":2147483647}}}`,
		`{"name":"estuary","runtimeConfig":{"bandwidth":{}}}`,
		`{"name":"estuary","runtimeConfig":{"bandwidth":null}}`,
		`{"name":"estuary","runtimeConfig":{"bandwidth":{"ingressRate":-1}}}`,
		`{"name":"estuary","runtimeConfig":{"bandwidth":{"egressRate":18446744073709551616}}}`,
		`{"name":"estuary","runtimeConfig":{"bandwidth":{"egressRate":1e6}}}`,
		`{"name":"a","NAME":"b","name":"c"}`,
		`{"name":5}`, `{"name":null}`, `[]`, `null`, `"estuary"`, ``, `{`, `{"name":"\ud800"}`,
		`{"name":"estuary"} trailing`, `{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, conf []byte) {
		c := parseNetConf(conf)
		if networkName(conf) != c.Name {
			t.Fatalf("networkName(%q) = %q, parseNetConf's name %q", conf, networkName(conf), c.Name)
		}
		bw := c.RuntimeConfig.Bandwidth
		if c.shaped() != (bw != nil && (bw.IngressRate > 0 || bw.EgressRate > 0)) {
			t.Fatalf("%q: shaped() = %v with bandwidth %+v", conf, c.shaped(), bw)
		}
		var obj map[string]json.RawMessage
		if !json.Valid(conf) || json.Unmarshal(conf, &obj) != nil || obj == nil {
			if !reflect.DeepEqual(c, netConf{}) {
				t.Fatalf("%q is no JSON object, parsed as %+v", conf, c)
			}
			return
		}
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("encode %+v: %v", c, err)
		}
		if again := parseNetConf(enc); !reflect.DeepEqual(again, c) {
			t.Fatalf("%q parsed as %+v, its encoding %s as %+v", conf, c, enc, again)
		}
		if c.Name != "" && !bytes.Contains(conf, []byte(`"`)) {
			t.Fatalf("%q: a name without a string", conf)
		}
	})
}
