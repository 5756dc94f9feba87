package cli

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// hybridnet's Overlay network and subnet, migrated onto a cluster where
// estuary's chart created its default network with the same names and
// addresses (the lab), are reported as existing as migrate would write
// them: the command succeeds, and the addresses can be migrated into it.
func TestMigrateOntoChartDefaultNetwork(t *testing.T) {
	hnCRDs(t)
	create(t, &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "mig-boot"},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, Mode: estuaryv1.NetworkModeVXLAN, NetID: ptr.To[int64](9)}})
	create(t, &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "mig-boot-v4"},
		Spec: estuaryv1.SubnetSpec{Network: "mig-boot", Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.189.0.0/24"}, NATOutgoing: ptr.To(true)}})
	hnObjects(t, `
apiVersion: networking.alibaba.com/v1
kind: Network
metadata: {name: mig-boot}
spec: {type: Overlay, netID: 9}
---
apiVersion: networking.alibaba.com/v1
kind: Subnet
metadata: {name: mig-boot-v4}
spec: {network: mig-boot, range: {version: "4", cidr: 10.189.0.0/24}}
`)
	out, err := run(t, "", "migrate", "hybridnet")
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	requireIn(t, out, "exists  network mig-boot, as migrate would write it", "exists  subnet mig-boot-v4, as migrate would write it")
}
