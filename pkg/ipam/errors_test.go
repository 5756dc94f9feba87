package ipam

import (
	"errors"
	"testing"
)

func TestErrorFormatAndKinds(t *testing.T) {
	cause := errors.New("boom")
	tests := []struct {
		name string
		err  *Error
		msg  string
		is   []error
	}{
		{"subnet and address",
			&Error{Kind: ErrExcluded, Subnet: "pods-v4", Addr: ip("10.0.0.1"), Detail: "address 10.0.0.1 is excluded (gateway)"},
			`subnet "pods-v4": address 10.0.0.1 is excluded (gateway)`, []error{ErrExcluded}},
		{"subnet with prefix",
			&Error{Kind: ErrExhausted, Subnet: "pods-v4", Prefix: pfx("10.0.0.0/16"), Detail: "no free address in [10.0.0.1, 10.0.255.254]"},
			`subnet "pods-v4" (10.0.0.0/16): no free address in [10.0.0.1, 10.0.255.254]`, []error{ErrExhausted}},
		{"network", &Error{Kind: ErrUnknownNetwork, Network: "pods", Detail: "no such network"},
			`network "pods": no such network`, []error{ErrUnknownNetwork}},
		{"cause", &Error{Kind: ErrInvalidConfig, Detail: `invalid range "x"`, Err: cause},
			`ipam: invalid range "x": boom`, []error{ErrInvalidConfig, cause}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.msg {
				t.Fatalf("message %q, want %q", got, tc.msg)
			}
			for _, k := range tc.is {
				if !errors.Is(tc.err, k) {
					t.Fatalf("errors.Is(%v) false", k)
				}
			}
			if errors.Is(tc.err, ErrInUse) {
				t.Fatal("matches an unrelated kind")
			}
		})
	}
}

func TestErrorsCarryContext(t *testing.T) {
	a := newWith(t, SubnetConfig{Name: "pods-v4", Network: "pods", Prefix: pfx("10.0.0.0/16"), Gateway: ip("10.0.0.1")})
	wantErr(t, a.Assign("pods-v4", ip("10.0.0.9"), "a"), nil, "")
	err := a.Assign("pods-v4", ip("10.0.0.9"), "b")
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("not an *Error: %T", err)
	}
	want := Error{Kind: ErrInUse, Subnet: "pods-v4", Addr: ip("10.0.0.9"), Owner: "b", Holder: "a"}
	if !errors.Is(e.Kind, want.Kind) || e.Subnet != want.Subnet || e.Addr != want.Addr || e.Owner != want.Owner || e.Holder != want.Holder {
		t.Fatalf("fields %+v, want %+v", e, want)
	}
	_, err = ParseRange("10.0.0.x")
	if !errors.As(err, &e) || e.Err == nil {
		t.Fatalf("ParseRange does not wrap the parse error: %v", err)
	}
}
