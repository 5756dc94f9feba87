package render

import (
	"encoding/json"
	"fmt"
)

// Names of the cluster DNS objects; they are kubeadm's, so tools that look for
// the usual kube-dns Service and coredns Deployment find them.
const (
	CoreDNSName        = "coredns"        // ServiceAccount, ConfigMap, Deployment, container
	CoreDNSClusterRole = "system:coredns" // ClusterRole and ClusterRoleBinding
	CoreDNSService     = "kube-dns"
	CoreDNSAppLabel    = "kube-dns" // value of the k8s-app label
)

// CoreDNSOptions are the lab's choices for the cluster DNS.
type CoreDNSOptions struct {
	Namespace string // kube-system
	Image     string // the lab's CoreDNS image, imported on every node
	ClusterIP string // the kube-dns Service address, kubelet's clusterDNS
	// SecondIP is the Service's address of the second family in a
	// dual-stack cluster (then PreferDualStack); empty: single-stack.
	SecondIP string
	Domain   string // the cluster domain, kubelet's clusterDomain
}

// Corefile returns the CoreDNS configuration for the cluster domain: the
// kubernetes plugin answers for the domain and the reverse zones. There is no
// forward plugin: the lab has no upstream DNS server (nothing leaves the lab's
// namespaces), so a name outside the cluster domain gets SERVFAIL.
func Corefile(domain string) string {
	return fmt.Sprintf(`.:53 {
    errors
    health :8080 {
        lameduck 5s
    }
    ready :8181
    kubernetes %s in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus :9153
    loop
    cache 30
    reload
    loadbalance
}
`, domain)
}

// CoreDNS renders the cluster DNS as one v1 List for `kubectl apply`: the
// ServiceAccount, the ClusterRole and its binding (kubeadm's rules), the
// ConfigMap with the Corefile, the Deployment and the kube-dns Service.
func CoreDNS(o CoreDNSOptions) ([]byte, error) {
	if o.Namespace == "" || o.Image == "" || o.ClusterIP == "" || o.Domain == "" {
		return nil, fmt.Errorf("coredns manifest: namespace, image, cluster IP and domain are required (got %+v)", o)
	}
	list := map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"items": []any{
			coreDNSServiceAccount(o), coreDNSClusterRole(), coreDNSClusterRoleBinding(o),
			coreDNSConfigMap(o), coreDNSDeployment(o), coreDNSService(o),
		},
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode coredns manifest: %w", err)
	}
	return b, nil
}

func object(apiVersion, kind, namespace, name string) map[string]any {
	meta := map[string]any{"name": name, "labels": map[string]string{"k8s-app": CoreDNSAppLabel}}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
}

func coreDNSServiceAccount(o CoreDNSOptions) map[string]any {
	return object("v1", "ServiceAccount", o.Namespace, CoreDNSName)
}

// coreDNSClusterRole is kubeadm's least-privilege role: list and watch what
// the kubernetes plugin serves from, nothing else.
func coreDNSClusterRole() map[string]any {
	r := object("rbac.authorization.k8s.io/v1", "ClusterRole", "", CoreDNSClusterRole)
	r["rules"] = []map[string]any{
		{"apiGroups": []string{""}, "resources": []string{"endpoints", "services", "pods", "namespaces"}, "verbs": []string{"list", "watch"}},
		{"apiGroups": []string{"discovery.k8s.io"}, "resources": []string{"endpointslices"}, "verbs": []string{"list", "watch"}},
	}
	return r
}

func coreDNSClusterRoleBinding(o CoreDNSOptions) map[string]any {
	b := object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", CoreDNSClusterRole)
	b["roleRef"] = map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CoreDNSClusterRole}
	b["subjects"] = []map[string]any{{"kind": "ServiceAccount", "name": CoreDNSName, "namespace": o.Namespace}}
	return b
}

func coreDNSConfigMap(o CoreDNSOptions) map[string]any {
	c := object("v1", "ConfigMap", o.Namespace, CoreDNSName)
	c["data"] = map[string]string{"Corefile": Corefile(o.Domain)}
	return c
}

// coreDNSDeployment runs one CoreDNS replica, scheduled and started like
// kubeadm's: critical priority, the control-plane and not-ready taints
// tolerated, the node's own resolver (dnsPolicy Default), not itself.
func coreDNSDeployment(o CoreDNSOptions) map[string]any {
	sel := map[string]string{"k8s-app": CoreDNSAppLabel}
	d := object("apps/v1", "Deployment", o.Namespace, CoreDNSName)
	d["spec"] = map[string]any{
		"replicas": 1,
		"selector": map[string]any{"matchLabels": sel},
		"template": map[string]any{
			"metadata": map[string]any{"labels": sel},
			"spec": map[string]any{
				"priorityClassName":  "system-cluster-critical",
				"serviceAccountName": CoreDNSName,
				"dnsPolicy":          "Default",
				"nodeSelector":       map[string]string{"kubernetes.io/os": "linux"},
				"tolerations": []map[string]string{
					{"key": "CriticalAddonsOnly", "operator": "Exists"},
					{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
					{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"},
				},
				"containers": []any{coreDNSContainer(o)},
				"volumes": []map[string]any{{"name": "config-volume", "configMap": map[string]any{
					"name": CoreDNSName, "items": []map[string]string{{"key": "Corefile", "path": "Corefile"}},
				}}},
			},
		},
	}
	return d
}

func coreDNSContainer(o CoreDNSOptions) map[string]any {
	port := func(name string, n int, proto string) map[string]any {
		return map[string]any{"name": name, "containerPort": n, "protocol": proto}
	}
	return map[string]any{
		"name": CoreDNSName, "image": o.Image, "imagePullPolicy": "Never",
		"args": []string{"-conf", "/etc/coredns/Corefile"},
		"resources": map[string]any{
			"requests": map[string]string{"cpu": "50m", "memory": "32Mi"},
			"limits":   map[string]string{"memory": "170Mi"},
		},
		"volumeMounts": []map[string]any{{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": true}},
		"ports": []map[string]any{
			port("dns", 53, "UDP"), port("dns-tcp", 53, "TCP"), port("metrics", 9153, "TCP"),
			port("liveness-probe", 8080, "TCP"), port("readiness-probe", 8181, "TCP"),
		},
		"livenessProbe": map[string]any{
			"httpGet":             map[string]any{"path": "/health", "port": "liveness-probe", "scheme": "HTTP"},
			"initialDelaySeconds": 60, "timeoutSeconds": 5, "failureThreshold": 5,
		},
		"readinessProbe": map[string]any{
			"httpGet":       map[string]any{"path": "/ready", "port": "readiness-probe", "scheme": "HTTP"},
			"periodSeconds": 2,
		},
		"securityContext": map[string]any{
			"allowPrivilegeEscalation": false,
			"readOnlyRootFilesystem":   true,
			"capabilities":             map[string]any{"add": []string{"NET_BIND_SERVICE"}, "drop": []string{"ALL"}},
		},
	}
}

func coreDNSService(o CoreDNSOptions) map[string]any {
	port := func(name string, n int, proto string) map[string]any {
		return map[string]any{"name": name, "port": n, "targetPort": n, "protocol": proto}
	}
	s := object("v1", "Service", o.Namespace, CoreDNSService)
	spec := map[string]any{
		"clusterIP": o.ClusterIP,
		"selector":  map[string]string{"k8s-app": CoreDNSAppLabel},
		"ports":     []map[string]any{port("dns", 53, "UDP"), port("dns-tcp", 53, "TCP"), port("metrics", 9153, "TCP")},
	}
	if o.SecondIP != "" {
		spec["clusterIPs"] = []string{o.ClusterIP, o.SecondIP}
		spec["ipFamilyPolicy"] = "PreferDualStack"
	}
	s["spec"] = spec
	return s
}
