package netmodel

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// FuzzParseBGPPeers: ParseBGPPeers, which reads the bgp-peers annotation
// any node writes on itself, never panics; what it accepts holds only
// named networks of peers with an IP address, an AS number and a known
// state, and reads back from its JSON encoding; a peer built from any
// fields is accepted exactly when those fields are valid, and otherwise
// refused with an error naming its network and the bad field.
func FuzzParseBGPPeers(f *testing.F) {
	for _, s := range []string{
		`{"fabric":[{"address":"10.0.0.1","asn":65000,"state":"Established"},{"address":"fd00::1","asn":4294967295,"state":"Idle"}]}`,
		`{"fabric":[],"other":null}`, `{}`, `null`, `[]`, `""`, ``, `{"":[]}`,
		`{"fabric":[{"address":"router.example","asn":65000,"state":"Established"}]}`,
		`{"fabric":[{"address":"fe80::1%eth0","asn":65000,"state":"Established"}]}`,
		`{"fabric":[{"address":"10.0.0.1","asn":0,"state":"Established"}]}`,
		`{"fabric":[{"address":"10.0.0.1","asn":-1,"state":"Established"}]}`,
		`{"fabric":[{"address":"10.0.0.1","asn":4294967296,"state":"Established"}]}`,
		`{"fabric":[{"address":"10.0.0.1","asn":65000,"state":"established"}]}`,
		`{"fabric":[{"address":"10.0.0.1","asn":65000,"state":"Established\n; and 0 more"}]}`,
		`{"fabric":[{"address":"10.0.0.1","asn":65000,"state":"Established","x":1}],"fabric":[]}`,
		`{"fabric":[{"address":"10.0.0.1","ASN":65000,"State":"Established"}]}`,
	} {
		f.Add(s, "fabric", "10.0.0.1", int64(65000), "Established")
	}
	f.Add(`{}`, "", "10.0.0.1", int64(65000), "Established")
	f.Add(`{}`, "fabric", "::ffff:10.0.0.1", int64(1), "Unknown")
	f.Fuzz(func(t *testing.T, v, network, addr string, asn int64, state string) {
		checkParsedPeers(t, v)
		p := estuaryv1.NodeBGPPeer{Address: addr, ASN: asn, State: state}
		enc, err := json.Marshal(map[string][]estuaryv1.NodeBGPPeer{network: {p}})
		if err != nil {
			t.Fatal(err)
		}
		network = encodedKey(t, enc) // JSON spells invalid UTF-8 as U+FFFD
		ip, perr := netip.ParseAddr(addr)
		valid := network != "" && perr == nil && ip.Zone() == "" && asn >= 1 && asn <= 4294967295 && slices.Contains(BGPSessionStates, state)
		got, err := ParseBGPPeers(string(enc))
		switch {
		case valid && (err != nil || !reflect.DeepEqual(got[network], []estuaryv1.NodeBGPPeer{p})):
			t.Fatalf("%s: %v, %v; want it read", enc, got, err)
		case !valid && err == nil:
			t.Fatalf("%s accepted", enc)
		case !valid && network != "" && !strings.Contains(err.Error(), "network "+strconv.Quote(network)):
			t.Fatalf("%s: error %q does not name the network", enc, err)
		}
	})
}

// encodedKey is the one key of the JSON object enc.
func encodedKey(t *testing.T, enc []byte) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(enc, &m); err != nil || len(m) != 1 {
		t.Fatalf("%s: %v", enc, err)
	}
	for k := range m {
		return k
	}
	return ""
}

func checkParsedPeers(t *testing.T, v string) {
	t.Helper()
	nets, err := ParseBGPPeers(v)
	if err != nil {
		if nets != nil {
			t.Fatalf("%q refused (%v) with %v", v, err, nets)
		}
		return
	}
	for name, peers := range nets {
		for _, p := range peers {
			ip, err := netip.ParseAddr(p.Address)
			if name == "" || err != nil || ip.Zone() != "" || p.ASN < 1 || p.ASN > 4294967295 || !slices.Contains(BGPSessionStates, p.State) {
				t.Fatalf("%q accepted with network %q peer %+v", v, name, p)
			}
		}
	}
	enc, err := json.Marshal(nets)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ParseBGPPeers(string(enc)); err != nil || !reflect.DeepEqual(again, nets) {
		t.Fatalf("%q read as %v, its encoding %s as %v, %v", v, nets, enc, again, err)
	}
}
