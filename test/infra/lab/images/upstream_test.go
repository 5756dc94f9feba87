package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestParseLdd(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffd)\n" +
		"\tlibcurl.so.4 => /lib/x86_64-linux-gnu/libcurl.so.4 (0x00007f)\n" +
		"\tlibmissing.so => not found\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n"
	got := ParseLdd(out)
	want := []string{"/lib/x86_64-linux-gnu/libcurl.so.4", "/lib64/ld-linux-x86-64.so.2"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("ParseLdd = %v, want %v", got, want)
	}
}

// TestUpstreamImagesRunTheirPrograms unpacks the agnhost and nginx layers
// into a directory and runs, chrooted there, what the upstream e2e tests run in
// those images: the shell, OpenBSD nc with -v -t -u -w -z, dig, curl, getent,
// the image's user and group, and nginx's configuration check.
func TestUpstreamImagesRunTheirPrograms(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	if _, err := os.Stat(testBusybox); err != nil {
		t.Skip("busybox is not unpacked (make lab-deps unpacks it)")
	}
	dir := t.TempDir()
	agnhost := filepath.Join(dir, "agnhost-bin")
	if err := os.WriteFile(agnhost, []byte("#!/bin/sh\necho agnhost \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	porter := filepath.Join(dir, "porter")
	for _, f := range []string{"localhost.crt", "localhost.key"} {
		if err := os.MkdirAll(porter, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(porter, f), []byte("test "+f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	img, err := Agnhost(AgnhostSources{Agnhost: agnhost, Porter: porter, BusyBox: testBusybox}, "example.local/agnhost:lab")
	if err != nil {
		t.Fatal(err)
	}
	root := unpack(t, img)
	script := `set -e
test "$(readlink /bin/sh)" = dash
test "$(command -v nc)" = /usr/bin/nc
test "$(command -v wget)" = /usr/bin/wget
wget -q -O - -T 1 http://127.0.0.1:1/ 2>/dev/null || test $? -ne 139
seq 1 2 | awk '{print $1}' | grep -q 2
nc -h 2>&1 | grep -q -- '-z'
nc -z -w 1 -v -t 127.0.0.1 1 2>&1 | grep -q 'refused'
nc -u -z -w 1 127.0.0.1 53
dig -v 2>&1 | grep -q DiG
curl --version | grep -q '^curl'
getent passwd user-defined-in-image | grep -q ':1000:'
id -Gn user-defined-in-image | grep -q group-defined-in-image
test -f /localhost.crt && test -d /uploads && test -L /agnhost-2
ip -V >/dev/null && ss -h >/dev/null && iperf3 -v >/dev/null
/agnhost-2 pause`
	out := chrootRun(t, root, "/bin/sh", "-c", script)
	if !strings.Contains(out, "agnhost pause") {
		t.Fatalf("agnhost-2 did not run agnhost: %q", out)
	}
	if len(img.Tags) != 2 || img.Tags[0] != UpstreamAgnhost || img.Tags[1] != PolicyAPIAgnhost || img.Entrypoint[0] != "/agnhost" || img.Cmd[0] != "pause" {
		t.Errorf("agnhost image names or run configuration: %+v", img)
	}

	nginx := filepath.Join("/var/cache/estuary", "debs", "nginx-root", "usr", "sbin", "nginx")
	if _, err := os.Stat(nginx); err != nil {
		t.Skip("nginx is not unpacked (make lab-deps unpacks it)")
	}
	ngx, err := Nginx(nginx, testBusybox)
	if err != nil {
		t.Fatal(err)
	}
	chrootRun(t, unpack(t, ngx), "/usr/sbin/nginx", "-t")

	bb, err := BusyBox(testBusybox)
	if err != nil {
		t.Fatal(err)
	}
	chrootRun(t, unpack(t, bb), "/bin/sh", "-c", `set -e; test "$(command -v wget)" = /usr/bin/wget; echo ok | grep -q ok`)
}

// testBusybox is Debian's busybox as make lab-deps unpacks it.
const testBusybox = "/var/cache/estuary/debs/busybox-root/bin/busybox"

// unpack writes img's layer into a new directory and returns it.
func unpack(t *testing.T, img Image) string {
	t.Helper()
	layer, err := layerTar(img.files())
	if err != nil {
		t.Fatal(err)
	}
	return extract(t, bytes.NewReader(layer))
}

// extract writes the entries of the tar stream r into a new directory and
// returns it.
func extract(t *testing.T, r io.Reader) string {
	t.Helper()
	root := t.TempDir()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.Clean(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, os.FileMode(h.Mode)&os.ModePerm)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		default:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, data, os.FileMode(h.Mode)&os.ModePerm)
			}
		}
		if err != nil {
			t.Fatalf("unpack %s: %v", h.Name, err)
		}
	}
}

func chrootRun(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v in the image: %v\n%s", args, err, out)
	}
	return string(out)
}
