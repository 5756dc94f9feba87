package chart

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/estuary-cni/estuary/test/infra/lab"
	"github.com/estuary-cni/estuary/test/infra/lab/images"
)

const dualStackValues = `
defaultNetwork:
  netID: 7
  subnets:
    - name: overlay-v4
      cidr: 10.96.0.0/12
    - name: overlay-v6
      cidr: fd00:10:96::/64
      natOutgoing: false
      excludeIPs: ["fd00:10:96::1-fd00:10:96::ff"]
overlay:
  vxlanPort: 4789
  vxlanParentRegex: "^eth[0-9]+$"
`

// renders are the value sets every test checks.
func renders(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	plan, err := lab.NewPlan(2)
	if err != nil {
		t.Fatal(err)
	}
	labValues, err := lab.EstuaryValues(plan)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]*unstructured.Unstructured{
		"default":    render(t),
		"lab":        render(t, "--values", valuesFile(t, labValues)),
		"dual-stack": render(t, "--values", valuesFile(t, []byte(dualStackValues))),
	}
}

func TestRBACHasNoWildcards(t *testing.T) {
	for name, objs := range renders(t) {
		roles, managerRoles := 0, []string(nil)
		for _, o := range objs {
			if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
				continue
			}
			roles++
			if o.GetLabels()["app.kubernetes.io/component"] == "manager" {
				managerRoles = append(managerRoles, o.GetKind()+"/"+o.GetName())
			}
			var r rbacv1.ClusterRole // a Role's rules have the same shape
			convert(t, o, &r)
			for i, rule := range r.Rules {
				for _, v := range slices.Concat(rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames, rule.NonResourceURLs) {
					if strings.Contains(v, "*") {
						t.Errorf("%s: %s %s rule %d has %q", name, o.GetKind(), o.GetName(), i, v)
					}
				}
				// Only a scraper's role grants a non-resource URL: get /metrics.
				if len(rule.NonResourceURLs) > 0 && (o.GetName() != "estuary-metrics-reader" ||
					!slices.Equal(rule.NonResourceURLs, []string{"/metrics"}) || !slices.Equal(rule.Verbs, []string{"get"})) {
					t.Errorf("%s: %s %s rule %d grants non-resource URLs %v %v", name, o.GetKind(), o.GetName(), i, rule.Verbs, rule.NonResourceURLs)
				}
			}
		}
		// The manager's: its ClusterRole, the leader-election Role, the
		// bootstrap owner (a ClusterRole granting nothing) and, with the
		// webhook, the certificate Secret's Role.
		want := []string{"ClusterRole/estuary-bootstrap", "ClusterRole/estuary-manager",
			"Role/estuary-manager-leader-election", "Role/estuary-manager-webhook"}
		slices.Sort(managerRoles)
		if !slices.Equal(managerRoles, want) {
			t.Errorf("%s: manager roles %v, want %v", name, managerRoles, want)
		}
		if roles <= len(managerRoles) {
			t.Errorf("%s: no role for the daemon rendered", name)
		}
	}
}

// checkPodSpec checks what both workloads share: they run before the network
// exists, on every node, whatever its taints.
func checkPodSpec(t *testing.T, what string, spec corev1.PodSpec, sa, priority, container string) *corev1.Container {
	t.Helper()
	if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("%s: hostNetwork %v dnsPolicy %q; want true, ClusterFirstWithHostNet", what, spec.HostNetwork, spec.DNSPolicy)
	}
	if spec.ServiceAccountName != sa || spec.PriorityClassName != priority {
		t.Errorf("%s: serviceAccount %q priorityClass %q; want %q, %q", what, spec.ServiceAccountName, spec.PriorityClassName, sa, priority)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Operator == corev1.TolerationOpExists && tl.Key == "" && tl.Effect == ""
	}) {
		t.Errorf("%s: tolerations %+v do not tolerate every taint", what, spec.Tolerations)
	}
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds != 10 {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want 10", what, spec.TerminationGracePeriodSeconds)
	}
	if len(spec.Containers) != 1 || spec.Containers[0].Name != container {
		t.Fatalf("%s: containers %+v, want one named %s", what, spec.Containers, container)
	}
	return &spec.Containers[0]
}

func checkProbe(t *testing.T, what string, p *corev1.Probe, path string, port int32) {
	t.Helper()
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.IntVal != port {
		t.Errorf("%s: probe %+v, want httpGet %s on %d", what, p, path, port)
	}
}

func TestDaemonSet(t *testing.T) {
	for name, objs := range renders(t) {
		var ds appsv1.DaemonSet
		convert(t, find(t, objs, "DaemonSet", "estuary-daemon"), &ds)
		what := name + ": DaemonSet estuary-daemon"
		if ds.Namespace != namespace {
			t.Errorf("%s: namespace %q, want the release namespace", what, ds.Namespace)
		}
		if ds.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "estuary-daemon" ||
			ds.Spec.Template.Labels["app.kubernetes.io/name"] != "estuary-daemon" {
			t.Errorf("%s: selector %v pod labels %v", what, ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
		}
		if u := ds.Spec.UpdateStrategy; u.Type != appsv1.RollingUpdateDaemonSetStrategyType ||
			u.RollingUpdate == nil || u.RollingUpdate.MaxUnavailable.IntValue() != 1 {
			t.Errorf("%s: updateStrategy %+v", what, u)
		}
		c := checkPodSpec(t, what, ds.Spec.Template.Spec, "estuary-daemon", "system-node-critical", "daemon")
		checkUnprivilegedDaemon(t, what, &ds)
		if !slices.Equal(c.Command, []string{"/estuary-daemon"}) {
			t.Errorf("%s: command %v", what, c.Command)
		}
		port := "8472"
		if name == "dual-stack" {
			port = "4789"
		}
		for _, a := range []string{"--node-name=$(NODE_NAME)", "--cni-binary-source=/estuary-cni",
			"--cni-extra-plugins=/plugins/loopback,/plugins/portmap,/plugins/bandwidth,/plugins/tuning", "--cni-bandwidth=auto", "--cni-portmap-backend=iptables", "--vxlan-port=" + port,
			"--health-probe-bind-address=127.0.0.1:9782", "--rt-tables-dir=/etc/iproute2/rt_tables.d"} {
			if !slices.Contains(c.Args, a) {
				t.Errorf("%s: args %v lack %s", what, c.Args, a)
			}
		}
		hasRegex := slices.Contains(c.Args, "--vxlan-parent-regex=^eth[0-9]+$")
		if hasRegex != (name == "dual-stack") || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--vxlan-parent=") }) {
			t.Errorf("%s: vxlan parent args %v", what, c.Args)
		}
		if len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil ||
			c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
			t.Errorf("%s: env %+v, want NODE_NAME from spec.nodeName", what, c.Env)
		}
		checkProbe(t, what+" liveness", c.LivenessProbe, "/healthz", 9782)
		checkProbe(t, what+" readiness", c.ReadinessProbe, "/readyz", 9782)
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			if p != nil && p.HTTPGet != nil && p.HTTPGet.Host != "127.0.0.1" {
				t.Errorf("%s: probe host %q, want 127.0.0.1 (the daemon binds its endpoints to the node's loopback)", what, p.HTTPGet.Host)
			}
		}
		checkDaemonVolumes(t, what, ds.Spec.Template.Spec, c)
		checkImage(t, what, c, images.DaemonRepo)
	}
}

// TestDaemonChainFlags: the bandwidth plugin is installed and chained by
// default and daemon.bandwidth=false turns the chaining off;
// daemon.portmapBackend becomes --cni-portmap-backend, iptables by default.
func TestDaemonChainFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--cni-bandwidth=auto"},
		{[]string{"--set", "daemon.bandwidth=true"}, "--cni-bandwidth=auto"},
		{[]string{"--set", "daemon.bandwidth=false"}, "--cni-bandwidth=off"},
		{nil, "--cni-portmap-backend=iptables"},
		{[]string{"--set", "daemon.portmapBackend=nftables"}, "--cni-portmap-backend=nftables"},
	} {
		var ds appsv1.DaemonSet
		convert(t, find(t, render(t, c.args...), "DaemonSet", "estuary-daemon"), &ds)
		flag, _, _ := strings.Cut(c.want, "=")
		args := ds.Spec.Template.Spec.Containers[0].Args
		n := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, flag+"=") })
		if n < 0 || args[n] != c.want || !slices.Contains(args, "--cni-extra-plugins=/plugins/loopback,/plugins/portmap,/plugins/bandwidth,/plugins/tuning") {
			t.Errorf("%v: args %v, want %s and /plugins/bandwidth installed", c.args, args, c.want)
		}
	}
}

func checkDaemonVolumes(t *testing.T, what string, spec corev1.PodSpec, c *corev1.Container) {
	t.Helper()
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == metricsCertSecret {
			continue // the metrics certificate: checkMetricsCertMounts checks it
		}
		if v.Name == "proc-sys" {
			continue // the host's /proc/sys: checkUnprivilegedDaemon checks it
		}
		if v.HostPath == nil || v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
			t.Errorf("%s: volume %s is not a DirectoryOrCreate hostPath", what, v.Name)
			continue
		}
		hostPaths[v.Name] = v.HostPath.Path
	}
	mounted := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		if m.MountPath == metricsCertDir || m.Name == "proc-sys" {
			continue
		}
		if hostPaths[m.Name] != m.MountPath {
			t.Errorf("%s: %s mounted at %s from host %s; want the same path", what, m.Name, m.MountPath, hostPaths[m.Name])
		}
		mounted[m.MountPath] = m
	}
	for _, p := range []string{"/opt/cni/bin", "/etc/cni/net.d", "/run/estuary", "/var/lib/estuary", "/var/run/netns", "/etc/iproute2/rt_tables.d"} {
		if _, ok := mounted[p]; !ok {
			t.Errorf("%s: %s is not mounted", what, p)
		}
	}
	if m := mounted["/var/run/netns"]; m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
		t.Errorf("%s: /var/run/netns propagation %v, want HostToContainer", what, m.MountPropagation)
	}
}

// checkImage checks the image and pull policy: the chart's defaults in
// every render (the lab installs a release whose defaults name its images).
func checkImage(t *testing.T, what string, c *corev1.Container, repo string) {
	t.Helper()
	wantImage, wantPolicy := repo+":0.1.0", corev1.PullIfNotPresent
	if c.Image != wantImage || c.ImagePullPolicy != wantPolicy {
		t.Errorf("%s: image %s (%s), want %s (%s)", what, c.Image, c.ImagePullPolicy, wantImage, wantPolicy)
	}
}

func TestManagerDeployment(t *testing.T) {
	for name, objs := range renders(t) {
		var d appsv1.Deployment
		convert(t, find(t, objs, "Deployment", "estuary-manager"), &d)
		what := name + ": Deployment estuary-manager"
		if d.Namespace != namespace || d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("%s: namespace %q replicas %v; want %s, 2", what, d.Namespace, d.Spec.Replicas, namespace)
		}
		if d.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "estuary-manager" ||
			d.Spec.Template.Labels["app.kubernetes.io/name"] != "estuary-manager" {
			t.Errorf("%s: selector %v pod labels %v", what, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}
		c := checkPodSpec(t, what, d.Spec.Template.Spec, "estuary-manager", "system-cluster-critical", "manager")
		if !slices.Equal(c.Command, []string{"/estuary-manager"}) {
			t.Errorf("%s: command %v", what, c.Command)
		}
		for _, a := range []string{"--leader-elect=true", "--leader-election-namespace=" + namespace,
			"--metrics-bind-address=:9780", "--metrics-secure=true", "--health-probe-bind-address=:9781", "--max-retain-ttl=168h",
			"--default-network-type=Overlay", "--default-ip-family=IPv4", "--default-ip-retain=true"} {
			if !slices.Contains(c.Args, a) {
				t.Errorf("%s: args %v lack %s", what, c.Args, a)
			}
		}
		checkProbe(t, what+" liveness", c.LivenessProbe, "/healthz", 9781)
		checkProbe(t, what+" readiness", c.ReadinessProbe, "/readyz", 9781)
		checkImage(t, what, c, images.ManagerRepo)
	}
}

func TestDefaultNetwork(t *testing.T) {
	want := map[string]struct {
		netID   int64
		subnets map[string]string // name: cidr
	}{
		"default":    {4, map[string]string{"overlay-v4": "10.244.0.0/16"}},
		"lab":        {4, map[string]string{"overlay-v4": lab.PodCIDR}},
		"dual-stack": {7, map[string]string{"overlay-v4": "10.96.0.0/12", "overlay-v6": "fd00:10:96::/64"}},
	}
	for name, rendered := range renders(t) {
		objs := bootstrapped(t, rendered)
		for _, o := range objs {
			if o.GetLabels()["app.kubernetes.io/managed-by"] != "estuary-manager" {
				t.Errorf("%s: bootstrap %s %s labels %v; want managed-by estuary-manager", name, o.GetKind(), o.GetName(), o.GetLabels())
			}
		}
		if len(objs) == 0 || objs[0].GetKind() != "Network" {
			t.Errorf("%s: the bootstrap objects do not start with the Network their Subnets need", name)
		}
		n := find(t, objs, "Network", "overlay")
		typ, _, _ := unstructured.NestedString(n.Object, "spec", "type")
		netID, _, _ := unstructured.NestedFieldNoCopy(n.Object, "spec", "netID")
		if typ != "Overlay" || fmt.Sprint(netID) != fmt.Sprint(want[name].netID) {
			t.Errorf("%s: Network overlay type %q netID %d; want Overlay, %d", name, typ, netID, want[name].netID)
		}
		for sn, cidr := range want[name].subnets {
			s := find(t, objs, "Subnet", sn)
			got, _, _ := unstructured.NestedString(s.Object, "spec", "range", "cidr")
			network, _, _ := unstructured.NestedString(s.Object, "spec", "network")
			nat, _, _ := unstructured.NestedBool(s.Object, "spec", "natOutgoing")
			wantNAT := sn != "overlay-v6"
			if got != cidr || network != "overlay" || nat != wantNAT {
				t.Errorf("%s: Subnet %s cidr %q network %q natOutgoing %v; want %s, overlay, %v", name, sn, got, network, nat, cidr, wantNAT)
			}
		}
	}
	off := render(t, "--set", "defaultNetwork.enabled=false")
	for _, o := range off {
		if o.GetKind() == "Network" || o.GetKind() == "Subnet" || o.GetName() == "estuary-bootstrap" {
			t.Errorf("defaultNetwork.enabled=false rendered %s %s", o.GetKind(), o.GetName())
		}
	}
}

// TestChartCRDsMatchGenerated guards the copy `make generate` makes.
func TestChartCRDsMatchGenerated(t *testing.T) {
	gen, err := filepath.Glob("../../config/crd/*.yaml")
	if err != nil || len(gen) == 0 {
		t.Fatalf("no generated CRDs: %v", err)
	}
	inChart, _ := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if len(inChart) != len(gen) {
		t.Errorf("chart has %d CRDs, config/crd %d: run `make generate`", len(inChart), len(gen))
	}
	for _, g := range gen {
		a, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(g)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("charts/estuary/crds/%s differs from %s (%v): run `make generate`", filepath.Base(g), g, err)
		}
	}
}
