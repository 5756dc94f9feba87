package cniserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// Add builds the attachment through the backend and records it before
// replying. A repeated Add for a recorded attachment in the same network
// namespace returns the recorded result without calling the backend.
func (s *Server) Add(ctx context.Context, req *cniv1.AddRequest) (*cniv1.AddReply, error) {
	start := time.Now()
	reply, err := s.add(ctx, req)
	s.metrics.observe(CommandAdd, start, err)
	return reply, err
}

func (s *Server) add(ctx context.Context, req *cniv1.AddRequest) (*cniv1.AddReply, error) {
	a, err := validateArgs(req.GetArgs(), true)
	if err != nil {
		return nil, err
	}
	key := keyOf(a)
	defer s.busy.mark(key)()
	defer s.locks.lock(a.ContainerID)()

	prev, err := s.store.Get(key)
	switch {
	case err == nil && prev.Netns == a.Netns && !prev.Recovered:
		return decodeResult(prev)
	case err == nil && prev.Netns == a.Netns:
		// Rebuilt from the kernel without its reply: the backend's Add
		// finds the interface in place and answers again.
	case err == nil:
		if err := s.backend.Del(ctx, attachmentOf(prev)); err != nil {
			return nil, backendError("del of stale endpoint "+key.String(), err)
		}
	case !errors.Is(err, endpointstore.ErrNotFound):
		return nil, storeError("add %s: %v", key, err)
	}

	reply, err := s.backend.Add(ctx, a)
	if err != nil {
		return nil, backendError("add "+key.String(), err)
	}
	ep, err := endpointOf(a, reply)
	reason := ReasonInternal
	if err == nil {
		err, reason = s.store.Put(ep), ReasonStore
	}
	if err != nil {
		if delErr := s.backend.Del(ctx, a); delErr != nil {
			err = errors.Join(err, fmt.Errorf("roll back: %w", delErr))
		}
		return nil, WithReason(reason, status.Errorf(codes.Internal, "add %s: %v", key, err))
	}
	s.changed()
	if err := s.admit(ctx, ep); err != nil {
		return nil, s.rollBack(ctx, a, key, err)
	}
	return reply, nil
}

// rollBack undoes a stored Add that failed after the store was written
// (the interface, then its record), and returns the Add's error.
func (s *Server) rollBack(ctx context.Context, a Attachment, key endpointstore.Key, err error) error {
	reason := ReasonOf(err)
	ctx = context.WithoutCancel(ctx)
	if delErr := s.backend.Del(ctx, a); delErr != nil {
		err = errors.Join(err, fmt.Errorf("roll back: %w", delErr))
	} else if delErr := s.store.Delete(key); delErr != nil {
		err = errors.Join(err, fmt.Errorf("roll back: %w", delErr))
	}
	s.changed()
	code := codes.Internal
	if reason == ReasonCanceled {
		code = codes.DeadlineExceeded
	}
	return WithReason(reason, status.Errorf(code, "add %s: %v", key, err))
}

// Del removes the attachment through the backend, then its record. It
// succeeds for attachments that were never added or are already gone; a
// failing backend keeps the record so that the runtime's retry finds it.
func (s *Server) Del(ctx context.Context, req *cniv1.DelRequest) (*cniv1.DelReply, error) {
	start := time.Now()
	reply, err := s.del(ctx, req)
	s.metrics.observe(CommandDel, start, err)
	return reply, err
}

func (s *Server) del(ctx context.Context, req *cniv1.DelRequest) (*cniv1.DelReply, error) {
	a, err := validateArgs(req.GetArgs(), false)
	if err != nil {
		return nil, err
	}
	key := keyOf(a)
	defer s.busy.mark(key)()
	defer s.locks.lock(a.ContainerID)()

	ep, err := s.store.Get(key)
	switch {
	case err == nil && a.Netns == "":
		a.Netns = ep.Netns
	case err != nil && !errors.Is(err, endpointstore.ErrNotFound):
		return nil, storeError("del %s: %v", key, err)
	}
	if err := s.backend.Del(ctx, a); err != nil {
		return nil, backendError("del "+key.String(), err)
	}
	if err := s.store.Delete(key); err != nil {
		return nil, storeError("del %s: %v", key, err)
	}
	s.changed()
	return &cniv1.DelReply{}, nil
}

// Check compares the request (and the runtime's prevResult, if any) with
// the record, then asks the backend to verify the interface.
func (s *Server) Check(ctx context.Context, req *cniv1.CheckRequest) (*cniv1.CheckReply, error) {
	start := time.Now()
	reply, err := s.check(ctx, req)
	s.metrics.observe(CommandCheck, start, err)
	return reply, err
}

func (s *Server) check(ctx context.Context, req *cniv1.CheckRequest) (*cniv1.CheckReply, error) {
	a, err := validateArgs(req.GetArgs(), true)
	if err != nil {
		return nil, err
	}
	defer s.locks.lock(a.ContainerID)()

	key := keyOf(a)
	ep, err := s.store.Get(key)
	if errors.Is(err, endpointstore.ErrNotFound) {
		return nil, status.Errorf(codes.NotFound, "check %s: no endpoint is recorded for this container and interface", key)
	}
	if err != nil {
		return nil, storeError("check %s: %v", key, err)
	}
	if diffs := compare(ep, a, req.GetPrevResult()); len(diffs) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "check %s: endpoint does not match its record: %s", key, strings.Join(diffs, "; "))
	}
	if err := s.backend.Check(ctx, a, ep); err != nil {
		return nil, backendError("check "+key.String(), err)
	}
	return &cniv1.CheckReply{}, nil
}

// Status reports ready when the backend is.
func (s *Server) Status(ctx context.Context, req *cniv1.StatusRequest) (*cniv1.StatusReply, error) {
	if n := len(req.GetNetworkConfig()); n > maxNetConfBytes {
		return nil, invalid("network_config", "%d bytes exceeds the %d byte limit", n, maxNetConfBytes)
	}
	if err := s.backend.Ready(ctx); err != nil {
		return &cniv1.StatusReply{Ready: false, Message: err.Error()}, nil
	}
	return &cniv1.StatusReply{Ready: true}, nil
}

// GC removes every attachment recorded under the request's network that is
// not in the valid list, through the backend first; attachments of other
// networks (another conflist naming this plugin) are not the runtime's to
// judge here. Failures are reported after every stale attachment has been
// tried; their records stay for the next GC.
func (s *Server) GC(ctx context.Context, req *cniv1.GCRequest) (*cniv1.GCReply, error) {
	start := time.Now()
	reply, err := s.gc(ctx, req)
	s.metrics.observe(CommandGC, start, err)
	return reply, err
}

func (s *Server) gc(ctx context.Context, req *cniv1.GCRequest) (*cniv1.GCReply, error) {
	if err := validateGC(req); err != nil {
		return nil, err
	}
	network := networkName(req.GetNetworkConfig())
	valid := make(map[endpointstore.Key]bool, len(req.GetValidAttachments()))
	for _, v := range req.GetValidAttachments() {
		valid[endpointstore.Key{ContainerID: v.GetContainerId(), IfName: v.GetIfname()}] = true
	}
	eps, err := s.store.List()
	if err != nil {
		return nil, storeError("gc: %v", err)
	}
	reply := &cniv1.GCReply{}
	var errs []error
	for _, ep := range eps {
		if valid[ep.Key] || (network != "" && ep.Network != "" && ep.Network != network) {
			continue
		}
		if err := s.collect(ctx, ep); err != nil {
			errs = append(errs, err)
			continue
		}
		reply.Removed = append(reply.Removed, &cniv1.Attachment{ContainerId: ep.ContainerID, Ifname: ep.IfName})
	}
	if len(reply.Removed) > 0 {
		s.changed()
	}
	if len(errs) > 0 {
		all := errors.Join(errs...)
		return nil, WithReason(ReasonOf(all),
			status.Errorf(codes.Internal, "gc: removed %d, failed %d: %v", len(reply.Removed), len(errs), all))
	}
	return reply, nil
}

// Collect removes the recorded endpoint with key through the backend, then
// its record, as a DEL would; a key with no record is success.
func (s *Server) Collect(ctx context.Context, key endpointstore.Key) error {
	ep, err := s.store.Get(key)
	if errors.Is(err, endpointstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.collect(ctx, ep); err != nil {
		return err
	}
	s.changed()
	return nil
}

// collect removes one stale endpoint.
func (s *Server) collect(ctx context.Context, ep endpointstore.Endpoint) error {
	defer s.busy.mark(ep.Key)()
	defer s.locks.lock(ep.ContainerID)()
	if err := s.backend.Del(ctx, attachmentOf(ep)); err != nil {
		return fmt.Errorf("del %s: %w", ep.Key, err)
	}
	if err := s.store.Delete(ep.Key); err != nil {
		return WithReason(ReasonStore, fmt.Errorf("del %s: %w", ep.Key, err))
	}
	return nil
}

// compare lists the differences between a record and a Check request.
func compare(ep endpointstore.Endpoint, a Attachment, prev *cniv1.AddReply) []string {
	var diffs []string
	field := func(name, got, want string) {
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s is %q, recorded %q", name, got, want))
		}
	}
	field("netns", a.Netns, ep.Netns)
	if a.PodUID != "" {
		field("pod UID", a.PodUID, ep.PodUID)
	}
	if a.PodNamespace != "" || a.PodName != "" {
		field("pod", a.PodNamespace+"/"+a.PodName, ep.PodNamespace+"/"+ep.PodName)
	}
	if prev != nil {
		got, want := addressesOf(prev), slices.Clone(ep.IPs)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			diffs = append(diffs, fmt.Sprintf("prevResult IPs are %v, recorded %v", got, want))
		}
	}
	return diffs
}

// netConf is what the daemon reads of a network configuration: its "name",
// and whether it asks for a bandwidth limit (runtimeConfig.bandwidth with a
// rate, which the runtime passes to a plugin with the bandwidth capability
// from the pod's kubernetes.io/ingress-bandwidth and egress-bandwidth
// annotations). The zero value stands for a missing or unparsable one.
type netConf struct {
	Name          string `json:"name"`
	RuntimeConfig struct {
		Bandwidth *struct {
			IngressRate uint64 `json:"ingressRate"`
			EgressRate  uint64 `json:"egressRate"`
		} `json:"bandwidth"`
	} `json:"runtimeConfig"`
}

// parseNetConf parses conf once for every field the daemon reads.
func parseNetConf(conf []byte) netConf {
	var c netConf
	if len(conf) == 0 || json.Unmarshal(conf, &c) != nil {
		return netConf{}
	}
	return c
}

// shaped reports whether the configuration asks for a bandwidth limit.
func (c netConf) shaped() bool {
	bw := c.RuntimeConfig.Bandwidth
	return bw != nil && (bw.IngressRate > 0 || bw.EgressRate > 0)
}

// networkName is the "name" of a network configuration; "" when it has
// none or does not parse (GC requests with such a configuration are
// refused by validateGC).
func networkName(conf []byte) string { return parseNetConf(conf).Name }

func keyOf(a Attachment) endpointstore.Key {
	return endpointstore.Key{ContainerID: a.ContainerID, IfName: a.IfName}
}

func attachmentOf(ep endpointstore.Endpoint) Attachment {
	return Attachment{
		ContainerID:  ep.ContainerID,
		IfName:       ep.IfName,
		Netns:        ep.Netns,
		PodNamespace: ep.PodNamespace,
		PodName:      ep.PodName,
		PodUID:       ep.PodUID,
	}
}

// endpointOf builds the record for a successful Add, rejecting a backend
// reply whose addresses the binary could not turn into a CNI result.
func endpointOf(a Attachment, reply *cniv1.AddReply) (endpointstore.Endpoint, error) {
	if reply == nil {
		return endpointstore.Endpoint{}, errors.New("backend returned no result")
	}
	for i, ip := range reply.GetIps() {
		if _, err := netip.ParsePrefix(ip.GetAddress()); err != nil {
			return endpointstore.Endpoint{}, fmt.Errorf("backend result ips[%d]: %w", i, err)
		}
	}
	raw, err := proto.Marshal(reply)
	if err != nil {
		return endpointstore.Endpoint{}, fmt.Errorf("encode result: %w", err)
	}
	conf := parseNetConf(a.NetworkConfig)
	return endpointstore.Endpoint{
		Key:          keyOf(a),
		Network:      conf.Name,
		Netns:        a.Netns,
		PodNamespace: a.PodNamespace,
		PodName:      a.PodName,
		PodUID:       a.PodUID,
		IPs:          addressesOf(reply),
		Result:       raw,
		Created:      time.Now().UTC(),
		Shaped:       conf.shaped(),
	}, nil
}

func addressesOf(r *cniv1.AddReply) []string {
	var out []string
	for _, ip := range r.GetIps() {
		if p, err := netip.ParsePrefix(ip.GetAddress()); err == nil {
			out = append(out, p.String())
		} else {
			out = append(out, ip.GetAddress())
		}
	}
	return out
}

func decodeResult(ep endpointstore.Endpoint) (*cniv1.AddReply, error) {
	reply := &cniv1.AddReply{}
	if err := proto.Unmarshal(ep.Result, reply); err != nil {
		return nil, storeError("add %s: decode recorded result: %v", ep.Key, err)
	}
	return reply, nil
}

// backendError keeps a status the backend chose and maps anything else to
// Internal, naming the operation; the Reason the backend marked (ReasonOf)
// stays with it.
func backendError(op string, err error) error {
	reason := ReasonOf(err)
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return WithReason(reason, status.Errorf(st.Code(), "%s: %s", op, st.Message()))
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return WithReason(reason, status.Errorf(codes.DeadlineExceeded, "%s: %v", op, err))
	}
	return WithReason(reason, status.Errorf(codes.Internal, "%s: backend: %v", op, err))
}

// storeError is an Internal status for a failure of the endpoint store.
func storeError(format string, args ...any) error {
	return WithReason(ReasonStore, status.Errorf(codes.Internal, format, args...))
}
