package images

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// keepArchives is how many archives of one repository CachedImage leaves in the
// cache: the newest, so that switching between a few builds stays cheap.
const keepArchives = 3

// ContentHash returns the first 12 hex digits of a SHA-256 over the paths inside
// the image and the contents of files, in order: a changed binary or layout gives
// a new hash.
func ContentHash(files []File) (string, error) {
	h := sha256.New()
	for _, f := range files {
		_, _ = fmt.Fprintf(h, "%s\x00%s\x00%o\x00", path.Clean(f.Path), f.kind(), f.mode())
		if f.kind() != "file" {
			_, _ = fmt.Fprintf(h, "%d\x00", len(f.Data))
			_, _ = h.Write(f.Data)
			continue
		}
		if err := hashFile(h, f.Source); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// hashFile adds the size and content of the file at src to h.
func hashFile(h io.Writer, src string) error {
	in, err := os.Open(filepath.Clean(src))
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer func() { _ = in.Close() }()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", src, err)
	}
	_, _ = fmt.Fprintf(h, "%d\x00", st.Size())
	if _, err := io.Copy(h, in); err != nil {
		return fmt.Errorf("hash %s: %w", src, err)
	}
	return nil
}

// Built is an image archive and the tag it carries.
type Built struct {
	Tag     string `json:"tag"`     // repository:content-hash
	Archive string `json:"archive"` // docker-archive tarball
}

// Repository returns the tag's repository part.
func (b Built) Repository() string { r, _ := splitTag(b.Tag); return r }

// Version returns the tag's version part (the content hash).
func (b Built) Version() string { _, v := splitTag(b.Tag); return v }

func splitTag(tag string) (repo, version string) {
	i := strings.LastIndex(tag, ":")
	if i < 0 || strings.Contains(tag[i:], "/") {
		return tag, ""
	}
	return tag[:i], tag[i+1:]
}

// CachedImage returns the archive of an image of files tagged repo:<content hash>
// under cacheDir, writing it only when it is not cached yet; older archives of the
// same repository beyond the newest few are removed.
func CachedImage(cacheDir, repo string, files []File, entrypoint []string) (Built, error) {
	h, err := ContentHash(files)
	if err != nil {
		return Built{}, fmt.Errorf("image %s: %w", repo, err)
	}
	b := Built{Tag: repo + ":" + h, Archive: filepath.Join(cacheDir, path.Base(repo)+"-"+h+".tar")}
	if _, err := os.Stat(b.Archive); err == nil {
		now := time.Now()
		_ = os.Chtimes(b.Archive, now, now) // marks it recently used for pruneArchives
		return b, nil
	}
	if err := WriteArchive(Image{Tag: b.Tag, Files: files, Entrypoint: entrypoint}, b.Archive); err != nil {
		return Built{}, err
	}
	pruneArchives(cacheDir, path.Base(repo), b.Archive)
	return b, nil
}

// pruneArchives removes the archives of one repository (base-<12 hex>.tar) beyond
// the newest keepArchives, never keep itself.
func pruneArchives(cacheDir, base, keep string) {
	matches, _ := filepath.Glob(filepath.Join(cacheDir, base+"-????????????.tar"))
	type entry struct {
		path string
		mod  int64
	}
	var es []entry
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil {
			es = append(es, entry{m, st.ModTime().UnixNano()})
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].mod > es[j].mod })
	for i, e := range es {
		if i >= keepArchives && e.path != keep {
			_ = os.Remove(e.path)
		}
	}
}
