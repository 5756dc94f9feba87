package cniserver_test

import (
	"context"
	"fmt"
	"testing"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/test/infra/cniservertest"
)

// BenchmarkAddDelRoundTrip measures one Add and one Del over the unix socket,
// each committing to the bbolt state file.
func BenchmarkAddDelRoundTrip(b *testing.B) {
	socket, state := cniservertest.Paths(b)
	cniservertest.Start(b, cniservertest.NewBackend(), socket, state)
	client := dial(b, socket)
	c := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		a := args(fmt.Sprintf("bench%d", i))
		i++
		if _, err := client.Add(c, &cniv1.AddRequest{Args: a}); err != nil {
			b.Fatalf("Add: %v", err)
		}
		if _, err := client.Del(c, &cniv1.DelRequest{Args: a}); err != nil {
			b.Fatalf("Del: %v", err)
		}
	}
}
