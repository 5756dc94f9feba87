// Package endpointstore owns the daemon's durable record of CNI endpoints: one entry
// per attachment (container ID + interface name) in a bbolt file, so that a
// restarted daemon knows every pod interface it built.
//
// The file is a cache of what the node has built, never the only record of
// it: a file that cannot be read (corrupt, a record that does not decode) is
// moved aside to <path>.corrupt-<time> for inspection and a new one is
// started, and a missing file is simply created. Either way Fresh reports
// that the store starts empty, and the daemon rebuilds its endpoints from
// the kernel and the node's IPInstances before it acts on the store.
package endpointstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// DefaultPath is where the daemon keeps its state file.
const DefaultPath = "/var/lib/estuary/state.db"

// bucketName holds endpoints; the suffix is the record schema version.
var bucketName = []byte("endpoints.v1")

// ErrNotFound is returned by Get when no endpoint has the key.
var ErrNotFound = errors.New("endpoint not found")

// Key identifies an endpoint.
type Key struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}

func (k Key) String() string { return k.ContainerID + "/" + k.IfName }

func (k Key) bytes() []byte { return []byte(k.String()) }

// Endpoint is the durable record of one attachment.
type Endpoint struct {
	Key
	Netns        string `json:"netns"`
	PodNamespace string `json:"podNamespace,omitempty"`
	PodName      string `json:"podName,omitempty"`
	PodUID       string `json:"podUID,omitempty"`
	// Network is the CNI network name the attachment was added under ("" in
	// records written before it was kept).
	Network string `json:"network,omitempty"`
	// IPs are the attachment's addresses in CIDR form.
	IPs []string `json:"ips,omitempty"`
	// Result is the Add reply as the server encoded it; opaque to the store.
	Result  []byte    `json:"result,omitempty"`
	Created time.Time `json:"created"`
	// Recovered marks a record rebuilt from the kernel after the state file
	// was lost: it has no Result.
	Recovered bool `json:"recovered,omitempty"`
	// Shaped marks an attachment whose ADD asked for a bandwidth limit
	// (runtimeConfig.bandwidth): the bandwidth plugin chained after estuary
	// shapes its host veth, and the fast path leaves it alone.
	Shaped bool `json:"shaped,omitempty"`
}

// Store is an open state file. It is safe for concurrent use.
type Store struct {
	db *bolt.DB
	gc groupCommit
	// fresh: the store started without the records of an earlier run.
	fresh bool
	// quarantined is where an unreadable file was moved, or "".
	quarantined string
}

// Open opens or creates the state file at path, creating its directory with
// mode 0700. It fails after a second if another process holds the file. A
// file that cannot be read is moved aside and replaced (see the package
// documentation); Fresh and Quarantined say so.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create state directory for %s: %w", path, err)
	}
	s, err := open(path)
	if err == nil || errors.Is(err, berrors.ErrTimeout) {
		return s, err
	}
	aside := fmt.Sprintf("%s.corrupt-%s", path, time.Now().UTC().Format("20060102T150405.000000000"))
	if rerr := os.Rename(path, aside); rerr != nil {
		return nil, errors.Join(err, fmt.Errorf("move the unreadable state file aside: %w", rerr))
	}
	if s, err = open(path); err != nil {
		return nil, err
	}
	s.quarantined = aside
	return s, nil
}

// open opens path and checks every page and record of it. bbolt panics on
// some damaged pages, and a page number past the end of a truncated file
// faults in the memory map; both mean an unreadable file. Faults become
// panics for this goroutine while the file is opened and checked. A fault
// inside bolt.Open leaves that attempt's descriptor and map behind; the
// file is moved aside, so the leak is bounded to one per damaged file.
func open(path string) (s *Store, err error) {
	var db *bolt.DB
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				_ = db.Close()
			}
			s, err = nil, fmt.Errorf("state file %s is unreadable: %v", path, r)
		}
	}()
	_, statErr := os.Stat(path)
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open state file %s: %w", path, err)
	}
	fresh := errors.Is(statErr, os.ErrNotExist)
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketName)
		if b == nil {
			fresh = true
			_, err := tx.CreateBucket(bucketName)
			return err
		}
		return verify(tx, b)
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return &Store{db: db, gc: groupCommit{db: db}, fresh: fresh}, nil
}

// verify runs bbolt's consistency check and decodes every record.
func verify(tx *bolt.Tx, b *bolt.Bucket) error {
	for err := range tx.Check() {
		return fmt.Errorf("consistency check: %w", err)
	}
	return b.ForEach(func(k, v []byte) error {
		var ep Endpoint
		if err := decode(v, &ep); err != nil {
			return fmt.Errorf("record %q: %w", k, err)
		}
		return nil
	})
}

// Fresh reports whether the store started without an earlier run's
// records: the file was missing, new, or moved aside as unreadable.
func (s *Store) Fresh() bool { return s.fresh || s.quarantined != "" }

// Quarantined is where an unreadable state file was moved, or "".
func (s *Store) Quarantined() string { return s.quarantined }

// Close releases the state file.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close state file: %w", err)
	}
	return nil
}

// Path returns the state file's path.
func (s *Store) Path() string { return s.db.Path() }

// Put writes ep, replacing any record with the same key. It returns once the
// transaction is committed and synced to disk; concurrent writes may share
// that transaction (see groupCommit).
func (s *Store) Put(ep Endpoint) error {
	if err := validKey(ep.Key); err != nil {
		return err
	}
	v, err := json.Marshal(ep)
	if err != nil {
		return fmt.Errorf("encode endpoint %s: %w", ep.Key, err)
	}
	err = s.gc.write(func(b *bolt.Bucket) error { return b.Put(ep.bytes(), v) })
	if err != nil {
		return fmt.Errorf("write endpoint %s: %w", ep.Key, err)
	}
	return nil
}

// Get returns the endpoint with key k, or ErrNotFound.
func (s *Store) Get(k Key) (Endpoint, error) {
	var ep Endpoint
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketName).Get(k.bytes())
		if v == nil {
			return ErrNotFound
		}
		return decode(v, &ep)
	})
	if err != nil {
		return Endpoint{}, fmt.Errorf("read endpoint %s: %w", k, err)
	}
	return ep, nil
}

// Delete removes the endpoint with key k. Deleting a missing key succeeds.
// Like Put, it returns once the deletion is committed and synced.
func (s *Store) Delete(k Key) error {
	err := s.gc.write(func(b *bolt.Bucket) error { return b.Delete(k.bytes()) })
	if err != nil {
		return fmt.Errorf("delete endpoint %s: %w", k, err)
	}
	return nil
}

// List returns every endpoint, ordered by key.
func (s *Store) List() ([]Endpoint, error) {
	var eps []Endpoint
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketName).ForEach(func(_, v []byte) error {
			var ep Endpoint
			if err := decode(v, &ep); err != nil {
				return err
			}
			eps = append(eps, ep)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	return eps, nil
}

func decode(v []byte, ep *Endpoint) error {
	if err := json.Unmarshal(v, ep); err != nil {
		return fmt.Errorf("decode endpoint record: %w", err)
	}
	return nil
}

func validKey(k Key) error {
	if k.ContainerID == "" || k.IfName == "" {
		return fmt.Errorf("endpoint key %q: container ID and ifname are required", k)
	}
	if strings.Contains(k.ContainerID, "/") || strings.Contains(k.IfName, "/") {
		return fmt.Errorf("endpoint key %q: container ID and ifname must not contain '/'", k)
	}
	return nil
}
