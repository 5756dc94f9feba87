// Package store owns the daemon's durable record of CNI endpoints: one entry
// per attachment (container ID + interface name) in a bbolt file, so that a
// restarted daemon knows every pod interface it built.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
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
	// IPs are the attachment's addresses in CIDR form.
	IPs []string `json:"ips,omitempty"`
	// Result is the Add reply as the server encoded it; opaque to the store.
	Result  []byte    `json:"result,omitempty"`
	Created time.Time `json:"created"`
}

// Store is an open state file. It is safe for concurrent use.
type Store struct {
	db *bolt.DB
	gc groupCommit
}

// Open opens or creates the state file at path, creating its directory with
// mode 0700. It fails after a second if another process holds the file.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create state directory for %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open state file %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketName)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initialise state file %s: %w", path, err)
	}
	return &Store{db: db, gc: groupCommit{db: db}}, nil
}

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
