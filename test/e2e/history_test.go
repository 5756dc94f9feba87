//go:build lab

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// TestAddressHistoryFollowsAStatefulSetPod: a StatefulSet pod on a fixed
// address (ip-pool), moved to another node (its node cordoned, the pod
// deleted), leaves a history that kubectl estuary get ip --history reads
// newest first: the hand-over to the pod on the second node, the keep,
// and the allocation on the first node.
func TestAddressHistoryFollowsAStatefulSetPod(t *testing.T) {
	e := needLab(t)
	addr := e.overlayAddr(t, 65170)
	t.Cleanup(func() { e.deleteHistory(t, addr) }) // after the namespace and its address are gone
	ns := e.newNamespace(t, "history")
	e.deleteHistory(t, addr) // an earlier run's
	sts := statefulSet(ns, "db", 1)
	sts.Spec.Template.Annotations = map[string]string{estuaryv1.AnnotationIPPool: addr}
	if err := e.c.Create(testCtx(t, time.Minute), sts); err != nil {
		t.Fatal(err)
	}
	first := e.waitReady(t, ns, map[string]string{"app": "db"}, 1, 4*time.Minute)[0]
	if first.Status.PodIP != addr {
		t.Fatalf("pod db-0 runs on %s, want its pool entry %s", first.Status.PodIP, addr)
	}
	e.moveStatefulPod(t, ns, "db-0", addr)
	second, err := e.podInstance(testCtx(t, time.Minute), ns, "db-0")
	if err != nil {
		t.Fatal(err)
	}

	plugin := e.plugin(t)
	want := []string{"HandedOver " + second.Spec.Binding.NodeName, "Kept " + first.Spec.NodeName, "Allocated " + first.Spec.NodeName}
	var h estuaryv1.IPHistory
	eventually(t, fmt.Sprintf("history of %s: %v", addr, want), time.Minute, func(context.Context) error {
		out, err := runPlugin(plugin, e.kubeconfig, "get", "ip", addr, "--history", "-o", "yaml")
		if err != nil {
			return err
		}
		if err := yaml.Unmarshal([]byte(out), &h); err != nil {
			return fmt.Errorf("parse: %w\n%s", err, out)
		}
		var got []string
		for _, en := range h.Spec.Entries {
			got = append(got, string(en.Move)+" "+en.Node)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("history %v", got)
		}
		return nil
	})
	for _, en := range h.Spec.Entries {
		if en.Namespace != ns || en.Pod != "db-0" || en.OwnerKind != "StatefulSet" || en.OwnerName != "db" || en.MAC == "" {
			t.Errorf("entry %s %s: namespace %q pod %q owner %s/%s MAC %q; want %s, db-0, StatefulSet/db and a MAC",
				en.Move, en.Time.UTC().Format(time.RFC3339), en.Namespace, en.Pod, en.OwnerKind, en.OwnerName, en.MAC, ns)
		}
	}
	table, err := runPlugin(plugin, e.kubeconfig, "get", "ip", addr, "--history")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl estuary get ip %s --history:\n%s", addr, table)
	rows := strings.Split(strings.TrimSpace(table), "\n")
	if len(rows) != 4 || !strings.Contains(rows[1], "HandedOver") || !strings.Contains(rows[2], "Kept") || !strings.Contains(rows[3], "Allocated") {
		t.Errorf("get ip %s --history:\n%s\nwant the hand-over, the keep and the allocation, newest first", addr, table)
	}
	at := h.Spec.Entries[2].Time.UTC().Format(time.RFC3339) // the allocation
	out, err := runPlugin(plugin, e.kubeconfig, "get", "ip", addr, "--at", at)
	if err != nil || !strings.Contains(out, "pod "+ns+"/db-0") || !strings.Contains(out, "node "+first.Spec.NodeName) {
		t.Errorf("get ip %s --at %s: %v\n%s\nwant pod %s/db-0 on %s", addr, at, err, out, ns, first.Spec.NodeName)
	}
}

// deleteHistory deletes addr's IPHistory once its address is free (its
// last entry a release), or at once when nothing holds it.
func (e *labEnv) deleteHistory(t *testing.T, addr string) {
	t.Helper()
	name := estuaryv1.InstanceName(netip.MustParseAddr(addr))
	err := waitFor("address "+addr+" released and its history deleted", 2*time.Minute, func(ctx context.Context) error {
		if err := e.c.Get(ctx, client.ObjectKey{Name: name}, &estuaryv1.IPInstance{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ipinstance %s still there (%w)", name, err)
		}
		h := &estuaryv1.IPHistory{}
		err := e.c.Get(ctx, client.ObjectKey{Name: name}, h)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if n := len(h.Spec.Entries); n > 0 && h.Spec.Entries[n-1].Move != estuaryv1.MoveReleased {
			return errors.New("release not recorded yet")
		}
		return e.c.Delete(ctx, h)
	})
	if err != nil {
		t.Errorf("clean up the history of %s: %v", addr, err)
	}
}
