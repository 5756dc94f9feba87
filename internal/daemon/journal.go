package daemon

// The node journal: what the node held before estuary changed it.
//
// Uninstalling must leave a node as it was before estuary came. Most of
// what the daemon makes is estuary's by construction and can simply be
// deleted (the conflist, the estuary-cni binary, every kernel object under
// state.DefaultOwnership, the nft tables). Two kinds of change are not:
//
//   - host-wide sysctls and those of links estuary does not own (the
//     uplink of an untagged underlay): a node may have held any value
//     before, so the first value the daemon overwrote is journaled, and
//     Uninstall writes it back;
//   - the reference plugins (loopback, portmap, bandwidth, tuning) the daemon
//     copies into the CNI bin dir, where the runtime's own may have been:
//     the first time the daemon writes one, it journals whether a file was
//     there and, if one was, keeps a copy of it, which Uninstall restores.
//
// The journal lives beside the endpoint store and survives restarts and
// upgrades; only the first value of each key or file is kept, so a
// restarted daemon never journals its own writes. It is written atomically
// before the change it records.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/sysctl"
)

// JournalName is the journal's file name in the state directory.
const JournalName = "node-journal.json"

// journalBackups is the directory under the state directory holding the
// files the daemon replaced.
const journalBackups = "replaced"

// journalFile is one file the daemon wrote that another party may own.
type journalFile struct {
	Path string `json:"path"`
	// Backup is the copy of the file that was at Path; empty when there
	// was none.
	Backup string `json:"backup,omitempty"`
}

// journalSysctl is a sysctl's value before the daemon first changed it.
type journalSysctl struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type journalRecord struct {
	Files   []journalFile   `json:"files,omitempty"`
	Sysctls []journalSysctl `json:"sysctls,omitempty"`
}

// journal records the node's state before the daemon's changes. It is safe
// for concurrent use.
type journal struct {
	mu        sync.Mutex
	dir       string // the state directory
	hostNetns string
	rec       journalRecord
}

// openJournal reads the journal in dir, or starts an empty one.
func openJournal(dir, hostNetns string) (*journal, error) {
	j := &journal{dir: dir, hostNetns: hostNetns}
	b, err := os.ReadFile(j.path()) // #nosec G304 -- the daemon's own state file
	if errors.Is(err, fs.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read node journal: %w", err)
	}
	if err := json.Unmarshal(b, &j.rec); err != nil {
		return nil, fmt.Errorf("parse node journal %s: %w", j.path(), err)
	}
	return j, nil
}

// openOrResetJournal opens the journal in dir; one that cannot be parsed is
// moved aside (JournalName.corrupt) and a new one started, so that a broken
// file costs the restore of what it held, never the node's pod network.
func openOrResetJournal(dir, hostNetns string) (*journal, error) {
	j, err := openJournal(dir, hostNetns)
	if err == nil {
		return j, nil
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if !errors.As(err, &syntax) && !errors.As(err, &typ) {
		return nil, err
	}
	p := filepath.Join(dir, JournalName)
	if rerr := os.Rename(p, p+".corrupt"); rerr != nil {
		return nil, errors.Join(err, fmt.Errorf("move it aside: %w", rerr))
	}
	log.Error(err, "node journal unreadable; moved aside, starting a new one: an uninstall will not restore what it held", "movedTo", p+".corrupt")
	return &journal{dir: dir, hostNetns: hostNetns}, nil
}

func (j *journal) path() string { return filepath.Join(j.dir, JournalName) }

// Before journals a sysctl's value before its first change, for settings
// of the node's namespace on links estuary does not own; it implements
// sysctl.Recorder.
func (j *journal) Before(nsPath string, s sysctl.Setting, old string) error {
	if nsPath != j.hostNetns || onOwnedLink(s.Key) {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if slices.ContainsFunc(j.rec.Sysctls, func(e journalSysctl) bool { return e.Key == s.Key }) {
		return nil
	}
	j.rec.Sysctls = append(j.rec.Sysctls, journalSysctl{Key: s.Key, Value: old})
	return j.saveLocked()
}

// onOwnedLink reports whether key is a per-link setting of a link estuary
// owns (net/ipv4/conf/estvx4/forwarding): such links go on uninstall, and
// their settings with them.
func onOwnedLink(key string) bool {
	parts := strings.Split(key, "/")
	return len(parts) >= 4 && (parts[2] == "conf" || parts[2] == "neigh") &&
		strings.HasPrefix(parts[3], podnet.HostVethPrefix)
}

// file journals path before the daemon first writes it: whether a file was
// there and, if so, a copy of it.
func (j *journal) file(path string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if slices.ContainsFunc(j.rec.Files, func(f journalFile) bool { return f.Path == path }) {
		return nil
	}
	e := journalFile{Path: path}
	b, err := os.ReadFile(path) // #nosec G304 -- an operator-configured install target
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("journal %s: %w", path, err)
	default:
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("journal %s: %w", path, err)
		}
		e.Backup = filepath.Join(j.dir, journalBackups, strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_"))
		if _, err := writeAtomic(e.Backup, b, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("journal %s: %w", path, err)
		}
	}
	j.rec.Files = append(j.rec.Files, e)
	return j.saveLocked()
}

func (j *journal) saveLocked() error {
	b, err := json.MarshalIndent(j.rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode node journal: %w", err)
	}
	if _, err := writeAtomic(j.path(), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write node journal: %w", err)
	}
	return nil
}

// restore puts back every journaled file and sysctl. A sysctl of a link
// that is gone is skipped. It reports what it restored, and every failure.
func (j *journal) restore() (files, sysctls int, err error) {
	j.mu.Lock()
	rec := journalRecord{Files: slices.Clone(j.rec.Files), Sysctls: slices.Clone(j.rec.Sysctls)}
	j.mu.Unlock()
	var errs []error
	for _, f := range rec.Files {
		if err := restoreFile(f); err != nil {
			errs = append(errs, err)
			continue
		}
		files++
	}
	for _, s := range rec.Sysctls {
		err := sysctl.Write(j.hostNetns, []sysctl.Setting{{Key: s.Key, Value: s.Value}})
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sysctls++
	}
	return files, sysctls, errors.Join(errs...)
}

// restoreFile puts f's backup back at its path, or removes the path when
// nothing was there.
func restoreFile(f journalFile) error {
	if f.Backup == "" {
		if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", f.Path, err)
		}
		return nil
	}
	b, err := os.ReadFile(f.Backup) // #nosec G304 -- the journal's own copy
	if err != nil {
		return fmt.Errorf("restore %s: %w", f.Path, err)
	}
	fi, err := os.Stat(f.Backup)
	if err != nil {
		return fmt.Errorf("restore %s: %w", f.Path, err)
	}
	if _, err := writeAtomic(f.Path, b, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("restore %s: %w", f.Path, err)
	}
	return nil
}
