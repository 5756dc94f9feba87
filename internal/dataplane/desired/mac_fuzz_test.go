package desired

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseMAC: ParseMAC, which reads the MACs of annotations (a pod's
// mac-address, a node's vtep-mac) and of link aliases, never panics,
// accepts exactly what net.ParseMAC reads as six bytes, gives those bytes,
// and reads back its own String (lower-case, colon-separated); what it
// refuses gets an error quoting the input.
func FuzzParseMAC(f *testing.F) {
	for _, s := range []string{
		"02:00:00:00:00:01", "0A:58:0A:0A:00:07", "02-00-00-00-00-01", "0200.0000.0001",
		"ff:ff:ff:ff:ff:ff", "00:00:00:00:00:00", // valid syntax; callers judge them
		"", "02:00:00:00:00", "02:00:00:00:00:01:", "02:00:00:00:00:001", "00:11:22:33:44:55:66:77",
		"00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", "g2:00:00:00:00:01",
		"02:00:00:00:00:01\x00", " 02:00:00:00:00:01", "02:00:00:00:00:01\n", "02:00-00:00:00:01",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMAC(s)
		hw, herr := net.ParseMAC(s)
		if herr != nil || len(hw) != 6 {
			if err == nil {
				t.Fatalf("ParseMAC(%q) = %s, want an error (net.ParseMAC: %v, %d bytes)", s, m, herr, len(hw))
			}
			if !strings.Contains(err.Error(), strconv.Quote(s)) || m != (MAC{}) {
				t.Fatalf("ParseMAC(%q) = %s, %v; want the zero MAC and an error quoting the input", s, m, err)
			}
			return
		}
		if err != nil || string(m[:]) != string(hw) {
			t.Fatalf("ParseMAC(%q) = %s, %v; want %s", s, m, err, hw)
		}
		str := m.String()
		if str != strings.ToLower(str) || strings.Count(str, ":") != 5 || len(str) != 17 {
			t.Fatalf("String of %q = %q, want xx:xx:xx:xx:xx:xx", s, str)
		}
		if again, err := ParseMAC(str); err != nil || again != m {
			t.Fatalf("ParseMAC(%q) = %s, %v; want %s", str, again, err, m)
		}
		if m.IsZero() != (m == MAC{}) || m.IsMulticast() != (hw[0]&1 == 1) {
			t.Fatalf("%s: IsZero %v, IsMulticast %v", m, m.IsZero(), m.IsMulticast())
		}
	})
}
