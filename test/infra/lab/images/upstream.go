package images

import (
	"path"
	"path/filepath"
)

// Images of the upstream Kubernetes e2e tests, by the names the pinned
// version's e2e.test asks for (test/utils/image/manifest.go), so its pods find
// them already imported and nothing is pulled. Each is assembled from this
// machine's Debian packages and the binaries the lab builds, with what the
// upstream image offers the tests.
const (
	UpstreamAgnhost = "registry.k8s.io/e2e-test-images/agnhost:2.63.0"
	// PolicyAPIAgnhost is the agnhost of sigs.k8s.io/network-policy-api's
	// conformance suite (conformance/base/manifests.yaml), served by the
	// same image: its pods run agnhost serve-hostname, netexec and porter,
	// and are probed with agnhost connect.
	PolicyAPIAgnhost  = "registry.k8s.io/e2e-test-images/agnhost:2.45"
	UpstreamPause     = "registry.k8s.io/pause:3.10.2"
	UpstreamBusyBox   = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
	UpstreamGlibcDNS  = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.0.0"
	UpstreamNginx     = "registry.k8s.io/e2e-test-images/nginx:1.15-4"
	busyboxPath       = "/bin/busybox"
	upstreamPATH      = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/"
	imageUserName     = "user-defined-in-image"
	imageGroupName    = "group-defined-in-image"
	upstreamNginxRoot = "/usr/share/nginx/html"
)

// toolPrograms are the programs of the upstream agnhost image (alpine with
// bind-tools, curl, netcat-openbsd, iproute2, iperf, bash) at their Debian paths.
var toolPrograms = []string{
	"/bin/dash", "/bin/bash", "/usr/bin/curl", "/bin/nc.openbsd", "/usr/bin/dig", "/usr/bin/nslookup",
	"/bin/ip", "/bin/ss", "/usr/bin/iperf", "/usr/bin/iperf3", "/usr/bin/getent", "/usr/bin/wget",
}

// Toolbox returns the base of the test images: the real programs of
// toolPrograms, dash as /bin/sh, busybox (Debian's dynamic build, see
// ProgramAt) for the small commands an alpine base has, nc as the OpenBSD
// netcat, an /etc with root, nobody and the user and group the upstream image
// defines, and a world-writable /tmp. No applet is linked under the name of a
// real program, and the real ones come first on PATH: busybox's nc lacks the
// options the tests use, and Debian's busybox wget crashes on -T.
func Toolbox(busybox string) ([]File, error) {
	files, err := Programs(toolPrograms...)
	if err != nil {
		return nil, err
	}
	bb, err := ProgramAt(busybox, busyboxPath)
	if err != nil {
		return nil, err
	}
	files = append(append(files, bb...),
		File{Path: "/usr/bin/nc", Link: "/bin/nc.openbsd"},
		File{Path: "/bin/sh", Link: "dash"},
		File{Path: "/tmp", Dir: true, Mode: 0o1777},
		File{Path: "/root", Dir: true, Mode: 0o700})
	files = append(files, etcFiles()...)
	names, err := BusyboxApplets(busybox)
	if err != nil {
		return nil, err
	}
	taken := map[string]bool{}
	for _, f := range files {
		taken[path.Join("/bin", path.Base(f.Path))] = true
	}
	return append(files, Applets(busyboxPath, "/bin", names, taken)...), nil
}

func etcFiles() []File {
	passwd := "root:x:0:0:root:/root:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" +
		imageUserName + ":x:1000:1000::/home/" + imageUserName + ":/bin/sh\n"
	group := "root:x:0:\nnogroup:x:65534:\n" + imageUserName + ":x:1000:\n" +
		imageGroupName + ":x:50000:" + imageUserName + "\n"
	return []File{
		{Path: "/etc/passwd", Data: []byte(passwd), Mode: 0o644},
		{Path: "/etc/group", Data: []byte(group), Mode: 0o644},
		{Path: "/etc/nsswitch.conf", Data: []byte("passwd: files\ngroup: files\nhosts: files dns\n"), Mode: 0o644},
	}
}

// AgnhostSources are the inputs of the agnhost image.
type AgnhostSources struct {
	Agnhost string // the agnhost binary built from the pinned Kubernetes
	CoreDNS string // the coredns binary (upstream ships /coredns); empty leaves it out
	Porter  string // test/images/agnhost/porter of the pinned Kubernetes (localhost.crt, .key)
	BusyBox string // busybox (ProgramAt)
}

// Agnhost returns the agnhost image named local and by both upstream tags
// (UpstreamAgnhost, PolicyAPIAgnhost): the
// toolbox, /agnhost with /agnhost-2 linked to it, porter's certificate and key
// at / (read from the Kubernetes module, never stored here), /uploads, and
// /coredns; the entrypoint is /agnhost and the default command pause.
func Agnhost(src AgnhostSources, local string) (Image, error) {
	files, err := Toolbox(src.BusyBox)
	if err != nil {
		return Image{}, err
	}
	files = append(files,
		File{Source: src.Agnhost, Path: "/agnhost"},
		File{Path: "/agnhost-2", Link: "agnhost"},
		File{Source: filepath.Join(src.Porter, "localhost.crt"), Path: "/localhost.crt", Mode: 0o644},
		File{Source: filepath.Join(src.Porter, "localhost.key"), Path: "/localhost.key", Mode: 0o600},
		File{Path: "/uploads", Dir: true})
	if src.CoreDNS != "" {
		files = append(files, File{Source: src.CoreDNS, Path: "/coredns"})
	}
	return Image{Tag: local, Tags: []string{UpstreamAgnhost, PolicyAPIAgnhost}, Files: sortedFiles(files),
		Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{upstreamPATH}}, nil
}

// GlibcDNS returns the glibc-dns-testing image: the toolbox (dig and getent
// against glibc's resolver), with a shell as the default command.
func GlibcDNS(busybox string) (Image, error) {
	files, err := Toolbox(busybox)
	if err != nil {
		return Image{}, err
	}
	return Image{Tag: UpstreamGlibcDNS, Files: sortedFiles(files), Entrypoint: []string{},
		Cmd: []string{"/bin/sh"}, Env: []string{upstreamPATH}}, nil
}

// BusyBox returns the busybox image: busybox and its applets in /bin, with
// GNU wget before busybox's on PATH (Debian's busybox wget crashes on -T).
func BusyBox(busybox string) (Image, error) {
	names, err := BusyboxApplets(busybox)
	if err != nil {
		return Image{}, err
	}
	files, err := ProgramAt(busybox, busyboxPath)
	if err != nil {
		return Image{}, err
	}
	wget, err := Programs("/usr/bin/wget")
	if err != nil {
		return Image{}, err
	}
	files = append(append(files, wget...), File{Path: "/tmp", Dir: true, Mode: 0o1777})
	files = append(files, etcFiles()...)
	files = append(files, Applets(busyboxPath, "/bin", names, map[string]bool{"/bin/wget": true})...)
	return Image{Tag: UpstreamBusyBox, Files: sortedFiles(files), Entrypoint: []string{},
		Cmd: []string{"sh"}, Env: []string{upstreamPATH}}, nil
}

// Nginx returns the nginx image: Debian's nginx binary (unpacked from its
// package at nginxBin, never installed as a service), its libraries, a
// configuration that serves a page on port 80 in the foreground, and the
// directories nginx's compiled-in paths name.
func Nginx(nginxBin, busybox string) (Image, error) {
	files, err := ProgramAt(nginxBin, "/usr/sbin/nginx")
	if err != nil {
		return Image{}, err
	}
	conf := "user root;\nworker_processes 1;\nerror_log stderr;\npid /run/nginx.pid;\n" +
		"events { worker_connections 256; }\n" +
		"http {\n  access_log off;\n  include /etc/nginx/mime.types;\n" +
		"  server {\n    listen 80;\n    listen [::]:80;\n    root " + upstreamNginxRoot + ";\n  }\n}\n"
	files = append(files,
		File{Path: "/etc/nginx/nginx.conf", Data: []byte(conf), Mode: 0o644},
		File{Path: "/etc/nginx/mime.types", Data: []byte("types {\n  text/html html;\n}\n"), Mode: 0o644},
		File{Path: upstreamNginxRoot + "/index.html", Data: []byte("<html><body>nginx</body></html>\n"), Mode: 0o644},
		File{Path: "/var/lib/nginx", Dir: true}, File{Path: "/var/log/nginx", Dir: true},
		File{Path: "/run", Dir: true}, File{Path: "/tmp", Dir: true, Mode: 0o1777},
		File{Path: "/bin/sh", Link: busyboxPath})
	bb, err := ProgramAt(busybox, busyboxPath)
	if err != nil {
		return Image{}, err
	}
	files = append(append(files, bb...), etcFiles()...)
	return Image{Tag: UpstreamNginx, Files: sortedFiles(files), Entrypoint: []string{},
		Cmd: []string{"/usr/sbin/nginx", "-g", "daemon off;"}, Env: []string{upstreamPATH}}, nil
}
