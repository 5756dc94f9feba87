package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPAddress is one IP address in canonical text form.
// +kubebuilder:validation:MaxLength=45
// +kubebuilder:validation:XValidation:rule="isIP(self) && ip.isCanonical(self)",message="must be an IP address in canonical form (e.g. 10.0.0.1 or fd00::1)"
type IPAddress string

// AddressOrRange is one IP address ("10.0.0.7") or an inclusive range of
// addresses of one family ("10.0.0.10-10.0.0.20"), in canonical text form.
//
// CEL has no ordering on IP addresses, so the order rules use the CIDR
// library bit by bit: a < b exactly when, at the first bit k where they
// differ (a/(k-1) contains b, a/k does not), a has a 0 (masking a to k bits
// gives the same address as masking it to k-1). The bit positions are a
// literal list so the API server can bound the rule's cost.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=91
// +kubebuilder:validation:XValidation:rule="size(self.split('-')) <= 2 && self.split('-').all(a, isIP(a) && ip.isCanonical(a))",message="must be an IP address or a range 'first-last' of IP addresses, in canonical form"
// +kubebuilder:validation:XValidation:rule="size(self.split('-')) != 2 || !self.split('-').all(a, isIP(a) && ip.isCanonical(a)) || (ip(self.split('-')[0]).family() == ip(self.split('-')[1]).family() && (self.split('-')[0] == self.split('-')[1] || [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128].exists(k, k <= (ip(self.split('-')[0]).family() == 4 ? 32 : 128) && cidr(self.split('-')[0] + ['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'][k - 1]).containsIP(self.split('-')[1]) && !cidr(self.split('-')[0] + ['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'][k]).containsIP(self.split('-')[1]) && cidr(self.split('-')[0] + ['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'][k]).masked().ip() == cidr(self.split('-')[0] + ['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'][k - 1]).masked().ip())))",message="a range's first address must not be after its last, and both must be of one family"
type AddressOrRange string

// AddressRange is the block of addresses a subnet hands out.
//
// Addresses outside [start, end], the gateway, the network address, the IPv4
// broadcast address and excluded addresses are never handed out; reserved
// addresses only to a pod that names them, of a namespace the subnet's
// reservedNamespaceSelector selects.
// +kubebuilder:validation:XValidation:rule="!isCIDR(self.cidr) || cidr(self.cidr).ip().family() == self.version",fieldPath=".version",reason=FieldValueInvalid,message="version must match the address family of cidr"
// +kubebuilder:validation:XValidation:rule="!has(self.start) || !isCIDR(self.cidr) || !isIP(self.start) || cidr(self.cidr).containsIP(self.start)",fieldPath=".start",reason=FieldValueInvalid,message="start must be inside cidr"
// +kubebuilder:validation:XValidation:rule="!has(self.end) || !isCIDR(self.cidr) || !isIP(self.end) || cidr(self.cidr).containsIP(self.end)",fieldPath=".end",reason=FieldValueInvalid,message="end must be inside cidr"
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || !isCIDR(self.cidr) || !isIP(self.gateway) || cidr(self.cidr).containsIP(self.gateway)",fieldPath=".gateway",reason=FieldValueInvalid,message="gateway must be inside cidr"
// +kubebuilder:validation:XValidation:rule="!has(self.start) || !has(self.end) || !isIP(self.start) || !isIP(self.end) || !ip.isCanonical(self.start) || !ip.isCanonical(self.end) || ip(self.start).family() != ip(self.end).family() || self.start == self.end || [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128].exists(k, k <= (ip(self.start).family() == 4 ? 32 : 128) && cidr(self.start + ['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'][k - 1]).containsIP(self.end) && !cidr(self.start + ['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'][k]).containsIP(self.end) && cidr(self.start + ['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'][k]).masked().ip() == cidr(self.start + ['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'][k - 1]).masked().ip())",fieldPath=".end",reason=FieldValueInvalid,message="start must not be after end, and both must be of one family"
// +kubebuilder:validation:XValidation:rule="!has(self.reservedIPs) || !isCIDR(self.cidr) || self.reservedIPs.all(x, x.split('-').all(a, !isIP(a) || cidr(self.cidr).containsIP(a)))",fieldPath=".reservedIPs",reason=FieldValueInvalid,message="every reserved address must be inside cidr"
// +kubebuilder:validation:XValidation:rule="!has(self.excludeIPs) || !isCIDR(self.cidr) || self.excludeIPs.all(x, x.split('-').all(a, !isIP(a) || cidr(self.cidr).containsIP(a)))",fieldPath=".excludeIPs",reason=FieldValueInvalid,message="every excluded address must be inside cidr"
// +kubebuilder:validation:XValidation:rule="has(self.start) == has(oldSelf.start) && (!has(self.start) || self.start == oldSelf.start)",fieldPath=".start",reason=FieldValueForbidden,message="start is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.end) == has(oldSelf.end) && (!has(self.end) || self.end == oldSelf.end)",fieldPath=".end",reason=FieldValueForbidden,message="end is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.gateway) == has(oldSelf.gateway) && (!has(self.gateway) || self.gateway == oldSelf.gateway)",fieldPath=".gateway",reason=FieldValueForbidden,message="gateway is immutable"
type AddressRange struct {
	// Version is the address family: 4 or 6. Immutable.
	// +required
	// +kubebuilder:validation:Enum=4;6
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="version is immutable"
	Version int32 `json:"version"`

	// CIDR is the subnet in canonical form: its network address and prefix
	// length, e.g. 10.10.0.0/16 or fd00:10::/64. IPv4 subnets are /30 or
	// larger; IPv6 subnets /64 to /127. Immutable.
	// +required
	// +kubebuilder:validation:MaxLength=49
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).masked() == cidr(self) && string(cidr(self)) == self",message="must be a CIDR in canonical form: the network address and prefix length, e.g. 10.10.0.0/16"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self).ip().family() == 6 || cidr(self).prefixLength() <= 30",message="an IPv4 subnet must be /30 or larger: /31 and /32 leave no address to hand out"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self).ip().family() == 4 || (cidr(self).prefixLength() >= 64 && cidr(self).prefixLength() <= 127)",message="an IPv6 subnet must be /64 to /127"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cidr is immutable"
	CIDR string `json:"cidr"`

	// Start is the first address pods may be given. Default: the first
	// address after the network address. Immutable.
	// +optional
	Start IPAddress `json:"start,omitempty"`

	// End is the last address pods may be given. Default: the last address
	// before the IPv4 broadcast address, or the last address of an IPv6
	// subnet. Immutable.
	// +optional
	End IPAddress `json:"end,omitempty"`

	// Gateway is the subnet's router; it is never handed out. Required for
	// VLAN subnets (checked by the webhook, which knows the network's mode).
	// Immutable.
	// +optional
	Gateway IPAddress `json:"gateway,omitempty"`

	// ReservedIPs are addresses given only to a pod that asks for them by
	// address (ip-address, ip-pool), and only to a pod of a namespace the
	// subnet's reservedNamespaceSelector selects.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	ReservedIPs []AddressOrRange `json:"reservedIPs,omitempty"`

	// ExcludeIPs are addresses never given to any pod.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	ExcludeIPs []AddressOrRange `json:"excludeIPs,omitempty"`
}

// SubnetSpec describes one block of addresses of a network.
// +kubebuilder:validation:XValidation:rule="has(self.netID) == has(oldSelf.netID) && (!has(self.netID) || self.netID == oldSelf.netID)",fieldPath=".netID",reason=FieldValueForbidden,message="netID is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.namespaceSelector) || (has(self.private) && self.private)",fieldPath=".namespaceSelector",reason=FieldValueForbidden,message="namespaceSelector is only allowed on a private subnet: a public subnet's addresses are its network's pool, for every namespace the network allows"
type SubnetSpec struct {
	// Network is the name of the Network this subnet belongs to. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="network is immutable"
	Network string `json:"network"`

	// Range is the block of addresses.
	// +required
	Range AddressRange `json:"range"`

	// NetID overrides the network's VLAN id for this subnet (VLAN networks
	// only): 0 (untagged) to 4094. Immutable.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4094
	NetID *int64 `json:"netID,omitempty"`

	// NATOutgoing masquerades traffic from this subnet's pods to destinations
	// outside the cluster behind the node's address. Default: true for
	// subnets of an Overlay network, false for Underlay ones.
	// +optional
	NATOutgoing *bool `json:"natOutgoing,omitempty"`

	// Private subnets give addresses only to pods that name them: the
	// subnet, or one of its addresses (ip-address, ip-pool).
	// +optional
	Private bool `json:"private,omitempty"`

	// NamespaceSelector, on a private subnet only, selects the namespaces
	// whose pods may take its addresses, by naming the subnet
	// (networking.estuary.io/subnet) or one of its addresses
	// (ip-address, ip-pool); a pod of another namespace is denied by the
	// admission webhook and refused by the manager. Unset: every
	// namespace the network allows. Namespace labels other than
	// kubernetes.io/metadata.name may be writable by the namespace's own
	// users in some clusters; select on that label when they are.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// ReservedNamespaceSelector selects the namespaces whose pods may name
	// one of range.reservedIPs with ip-address or ip-pool. Unset: no
	// namespace; a reserved address is then never given to a pod. {}:
	// every namespace.
	// +optional
	ReservedNamespaceSelector *metav1.LabelSelector `json:"reservedNamespaceSelector,omitempty"`
}

// SubnetStatus is what the manager observes of a subnet.
//
// Total and Available are decimal strings because an IPv6 /64 holds more
// addresses than an int64 can count.
type SubnetStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Total is the number of addresses pods can be given.
	// +optional
	Total string `json:"total,omitempty"`
	// Used is the number of addresses allocated or retained.
	// +optional
	Used int64 `json:"used,omitempty"`
	// Available is the number of addresses still free for allocation.
	// +optional
	Available string `json:"available,omitempty"`
	// LastAllocatedIP is where the next allocation's search starts after.
	// +optional
	LastAllocatedIP string `json:"lastAllocatedIP,omitempty"`
	// Conditions are the subnet's observed conditions.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is a block of addresses that belongs to one Network.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=sn,categories=estuary
// +kubebuilder:printcolumn:name="Network",type=string,JSONPath=`.spec.network`
// +kubebuilder:printcolumn:name="Version",type=integer,JSONPath=`.spec.range.version`
// +kubebuilder:printcolumn:name="CIDR",type=string,JSONPath=`.spec.range.cidr`
// +kubebuilder:printcolumn:name="Gateway",type=string,JSONPath=`.spec.range.gateway`
// +kubebuilder:printcolumn:name="Total",type=string,JSONPath=`.status.total`
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=`.status.used`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.available`
// +kubebuilder:printcolumn:name="Private",type=boolean,JSONPath=`.spec.private`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Subnet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SubnetSpec `json:"spec"`
	// +optional
	Status SubnetStatus `json:"status,omitempty"`
}

// SubnetList is a list of Subnets.
//
// +kubebuilder:object:root=true
type SubnetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Subnet `json:"items"`
}
