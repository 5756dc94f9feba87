package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// archive writes files into a .tar.gz under one top directory. Collectors
// run concurrently; each adds whole files, one at a time. The archive is
// written beside its final name and renamed there when closed whole, so a
// failed or interrupted dump never leaves a truncated archive under the
// name the user gave.
type archive struct {
	mu    sync.Mutex
	final string
	f     *os.File
	gz    *gzip.Writer
	tw    *tar.Writer
	top   string
	files map[string]int // path in the archive -> size
	err   error
}

func createArchive(final, top string) (*archive, error) {
	f, err := os.CreateTemp(filepath.Dir(final), "."+filepath.Base(final)+".*.partial")
	if err != nil {
		return nil, fmt.Errorf("create the archive next to %s: %w", final, err)
	}
	gz := gzip.NewWriter(f)
	return &archive{final: final, f: f, gz: gz, tw: tar.NewWriter(gz), top: top, files: map[string]int{}}, nil
}

// add writes name (a slash path under the top directory) with data. The
// first write error sticks and is returned by close.
func (a *archive) add(name string, data []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return
	}
	hdr := &tar.Header{Name: path.Join(a.top, name), Mode: 0o600, Size: int64(len(data)), ModTime: time.Now(), Typeflag: tar.TypeReg}
	if err := a.tw.WriteHeader(hdr); err != nil {
		a.err = fmt.Errorf("write %s into the archive: %w", name, err)
		return
	}
	if _, err := a.tw.Write(data); err != nil {
		a.err = fmt.Errorf("write %s into the archive: %w", name, err)
		return
	}
	a.files[name] = len(data)
}

// list is the archive's files so far, sorted.
func (a *archive) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.files))
	for n := range a.files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// close finishes the archive and moves it to its final name; on any error
// the partial file is removed.
func (a *archive) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	err := errors.Join(a.err, a.tw.Close(), a.gz.Close(), a.f.Sync(), a.f.Close())
	if err == nil {
		err = os.Rename(a.f.Name(), a.final)
	}
	if err != nil {
		_ = os.Remove(a.f.Name())
		return fmt.Errorf("write the archive %s: %w", a.final, err)
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it and counts the bytes
// it dropped before them: a log's most recent part is what a maintainer
// reads first, and memory stays bounded whatever the log's size.
type tailBuffer struct {
	max     int
	buf     []byte
	dropped int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		cut := len(t.buf) - t.max
		t.dropped += int64(cut)
		t.buf = append(t.buf[:0], t.buf[cut:]...)
	}
	return len(p), nil
}

// kept returns what is kept: at most max bytes, starting at a line when
// some were dropped, behind a line saying how many were.
func (t *tailBuffer) kept() []byte {
	b := t.buf
	dropped := t.dropped
	if len(b) > t.max {
		dropped += int64(len(b) - t.max)
		b = b[len(b)-t.max:]
	}
	if dropped == 0 {
		return b
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		dropped += int64(i + 1)
		b = b[i+1:]
	}
	return append([]byte(fmt.Sprintf("[sysdump: the first %d bytes are left out; --max-log-bytes keeps the last %d]\n", dropped, t.max)), b...)
}

// truncated reports whether kept leaves anything out.
func (t *tailBuffer) truncated() bool { return t.dropped > 0 || len(t.buf) > t.max }

var _ io.Writer = (*tailBuffer)(nil)
