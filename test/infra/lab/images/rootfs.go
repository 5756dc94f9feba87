package images

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Programs returns the layer files that run the programs installed on this
// machine at paths (Debian packages): each program at its own path, and every
// shared object the dynamic loader maps for it, as ldd lists them, copied (links
// followed) to the path ldd names. A static program brings nothing else.
func Programs(paths ...string) ([]File, error) {
	seen := map[string]bool{}
	var out []File
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, File{Source: p, Path: p})
		}
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("program %s: %w (make lab-deps installs the lab's image packages)", p, err)
		}
		add(p)
		libs, err := sharedObjects(p)
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			add(l)
		}
	}
	return out, nil
}

// ProgramAt returns the layer files that run the program at src as dst
// inside an image (a program unpacked from a package rather than installed):
// the program and its shared objects, as Programs.
func ProgramAt(src, dst string) ([]File, error) {
	files, err := Programs(src)
	if err != nil {
		return nil, err
	}
	files[0].Path = dst
	return files, nil
}

// sharedObjects runs ldd on program and returns the objects it lists.
func sharedObjects(program string) ([]string, error) {
	cmd := exec.Command("ldd", program) //nolint:gosec // G204: programs the lab names itself
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil && strings.Contains(stdout.String()+stderr.String(), "not a dynamic executable") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w: %s", program, err, strings.TrimSpace(stderr.String()))
	}
	return ParseLdd(stdout.String()), nil
}

// ParseLdd returns the absolute paths of the shared objects in ldd's output:
// "name => /path (addr)" and the loader's "/path (addr)"; the vDSO and objects
// ldd could not find are left out.
func ParseLdd(out string) []string {
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		p, _, _ := strings.Cut(line, " ")
		if strings.HasPrefix(p, "/") {
			libs = append(libs, path.Clean(p))
		}
	}
	return libs
}

// Applets returns a link in dir to busybox for each name, skipping the names in
// taken (paths a real program already holds in the image).
func Applets(busybox, dir string, names []string, taken map[string]bool) []File {
	var out []File
	for _, n := range names {
		p := path.Join(dir, n)
		if n == "" || n == path.Base(busybox) || taken[p] {
			continue
		}
		out = append(out, File{Path: p, Link: busybox})
	}
	return out
}

// BusyboxApplets lists the applets of the busybox binary at bin.
func BusyboxApplets(bin string) ([]string, error) {
	out, err := exec.Command(bin, "--list").Output() //nolint:gosec // G204: the lab's own busybox path
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", bin, err)
	}
	return strings.Fields(string(out)), nil
}

// CachedFull returns the archive of img under cacheDir, named base-<hash> where
// the hash covers the image's files, names and run configuration, writing it only
// when it is not cached yet; older archives of base beyond the newest few are
// removed.
func CachedFull(cacheDir, base string, img Image) (string, error) {
	h, err := ContentHash(img.files())
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.Tag, err)
	}
	meta := sha256.Sum256([]byte(strings.Join([]string{h, img.Tag, strings.Join(img.Tags, ","),
		strings.Join(img.Entrypoint, "\x00"), strings.Join(img.Cmd, "\x00"), strings.Join(img.Env, "\x00")}, "\x01")))
	archive := filepath.Join(cacheDir, base+"-"+hex.EncodeToString(meta[:])[:12]+".tar")
	if _, err := os.Stat(archive); err == nil {
		now := time.Now()
		_ = os.Chtimes(archive, now, now)
		return archive, nil
	}
	if err := WriteArchive(img, archive); err != nil {
		return "", err
	}
	pruneArchives(cacheDir, base, archive)
	return archive, nil
}

// sortedFiles orders files by path inside the image, so that a layer does not
// depend on the order its parts were listed in; a later entry for the same path
// replaces an earlier one.
func sortedFiles(files []File) []File {
	byPath := map[string]File{}
	for _, f := range files {
		byPath[path.Clean(f.Path)] = f
	}
	out := make([]File, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
