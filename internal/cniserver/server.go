// Package cniserver owns the daemon side of the CNI protocol: the gRPC
// server on the node-local unix socket that estuary-cni talks to, request
// validation, per-container serialisation, the endpoint store (subpackage
// store) that is written before Add replies, the admission of a new
// endpoint to the node's network policy before Add replies (PolicyGate),
// and the requests' metrics:
// their duration, and their failures by a Reason of a fixed set that the
// error paths mark (WithReason). Building the interfaces themselves is
// delegated to a Backend, which marks its own failures.
package cniserver

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// DefaultSocketPath is where the daemon listens and estuary-cni dials.
const DefaultSocketPath = "/run/estuary/cni.sock"

// Config configures a Server.
type Config struct {
	// SocketPath is the unix socket to listen on; DefaultSocketPath if empty.
	SocketPath string
	// StatePath is the bbolt state file; endpointstore.DefaultPath if empty.
	StatePath string
	// Backend builds and removes interfaces. Required.
	Backend Backend
	// OnChange, if set, is called after each change of the endpoint store
	// (an attachment recorded or removed). It must not block: the node's
	// data-path reconcile uses it as a trigger.
	OnChange func()
	// Metrics, if set, records every ADD, DEL, CHECK and GC request.
	Metrics *Metrics
	// PolicyGate, if set, admits every new endpoint to the node's network
	// policy before its ADD replies.
	PolicyGate PolicyGate
}

// Server serves the CNI service on a unix socket.
type Server struct {
	cniv1.UnimplementedCNIServer

	backend    Backend
	onChange   func()
	gate       PolicyGate
	metrics    *Metrics
	store      *endpointstore.Store
	locks      keyLocks
	busy       busyKeys
	grpc       *grpc.Server
	lis        net.Listener
	socketPath string
	closeOnce  sync.Once
	closeErr   error
}

// New opens the state file and listens on the socket (mode 0600, replacing a
// stale socket file). Call Serve to answer requests and Close to stop.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("cniserver: a Backend is required")
	}
	if cfg.SocketPath == "" {
		cfg.SocketPath = DefaultSocketPath
	}
	if cfg.StatePath == "" {
		cfg.StatePath = endpointstore.DefaultPath
	}
	st, err := endpointstore.Open(cfg.StatePath)
	if err != nil {
		return nil, fmt.Errorf("cniserver: %w", err)
	}
	lis, err := listen(cfg.SocketPath)
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("cniserver: %w", err)
	}
	s := &Server{
		backend:    cfg.Backend,
		onChange:   cfg.OnChange,
		gate:       cfg.PolicyGate,
		metrics:    cfg.Metrics,
		store:      st,
		locks:      keyLocks{m: map[string]*keyLock{}},
		busy:       busyKeys{m: map[endpointstore.Key]int{}},
		grpc:       grpc.NewServer(),
		lis:        lis,
		socketPath: cfg.SocketPath,
	}
	cniv1.RegisterCNIServer(s.grpc, s)
	return s, nil
}

// changed calls the OnChange hook, if any.
func (s *Server) changed() {
	if s.onChange != nil {
		s.onChange()
	}
}

// Store returns the endpoint store the server writes.
func (s *Server) Store() *endpointstore.Store { return s.store }

// SocketPath returns the path the server listens on.
func (s *Server) SocketPath() string { return s.socketPath }

// Serve answers requests until Close is called.
func (s *Server) Serve() error {
	if err := s.grpc.Serve(s.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("cniserver: serve on %s: %w", s.socketPath, err)
	}
	return nil
}

// Close stops the server after in-flight requests finish, removes the socket
// and closes the state file. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.grpc.GracefulStop()
		var errs []error
		if err := os.Remove(s.socketPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove socket %s: %w", s.socketPath, err))
		}
		if err := s.store.Close(); err != nil {
			errs = append(errs, err)
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// listen binds a unix socket under a temporary name, restricts it to root
// (0600) and renames it into place, so the socket is never reachable with a
// wider mode.
func listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory %s: %w", dir, err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d.tmp", filepath.Base(path), os.Getpid()))
	if err := removeStaleSocket(tmp); err != nil {
		return nil, err
	}
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", tmp, err)
	}
	lis.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		return nil, closeAfter(lis, tmp, fmt.Errorf("restrict socket %s: %w", tmp, err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, closeAfter(lis, tmp, fmt.Errorf("move socket into place at %s: %w", path, err))
	}
	return lis, nil
}

func closeAfter(lis net.Listener, path string, err error) error {
	_ = lis.Close()
	_ = os.Remove(path)
	return err
}

// removeStaleSocket removes a socket file left by a previous daemon. Any
// other kind of file at the path is an error, never silently deleted.
func removeStaleSocket(path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect socket path %s: %w", path, err)
	}
	if info.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("socket path %s exists and is not a socket (%s)", path, info.Mode().Type())
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// Busy returns the attachments with an Add, a Del or a collection in
// progress: their interfaces and routes are being written by the backend
// and their records may not match the kernel yet.
func (s *Server) Busy() []endpointstore.Key { return s.busy.list() }

// busyKeys counts the requests in progress per attachment.
type busyKeys struct {
	mu sync.Mutex
	m  map[endpointstore.Key]int
}

// mark records a request for k in progress and returns its end.
func (b *busyKeys) mark(k endpointstore.Key) func() {
	b.mu.Lock()
	b.m[k]++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		if b.m[k]--; b.m[k] == 0 {
			delete(b.m, k)
		}
		b.mu.Unlock()
	}
}

func (b *busyKeys) list() []endpointstore.Key {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]endpointstore.Key, 0, len(b.m))
	for k := range b.m {
		out = append(out, k)
	}
	return out
}

// keyLocks serialises requests per container ID.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

// lock takes the lock for key and returns its release function.
func (k *keyLocks) lock(key string) func() {
	k.mu.Lock()
	l := k.m[key]
	if l == nil {
		l = &keyLock{}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()

	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
