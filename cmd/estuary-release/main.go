// Command estuary-release cuts a release of estuary (`make release`): the
// estuary-manager and estuary-daemon images as OCI indexes for linux/amd64
// and linux/arm64 pushed to --registry (or written as OCI layouts to --out),
// the chart pushed to oci://<registry>/charts, and kubectl-estuary archives
// with checksums and a krew manifest in --out. The work is internal/release;
// see docs/release.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/estuary-cni/estuary/internal/release"
	"github.com/estuary-cni/estuary/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root().ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}

// flags are the command line's values before they become release.Options.
type flags struct {
	opts            release.Options
	helm            string
	allowDirty      bool
	imagePlatforms  []string
	pluginPlatforms []string
}

func root() *cobra.Command {
	var f flags
	c := &cobra.Command{
		Use:          "estuary-release --release X.Y.Z [--registry HOST[:PORT]/PATH]",
		Short:        "Build and publish estuary's images, chart and kubectl plugin",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		Version:      version.Version,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, &f)
		},
	}
	c.SetVersionTemplate(version.Line("estuary-release") + "\n")
	fl := c.Flags()
	fl.StringVar(&f.opts.Version, "release", "", "version to release: MAJOR.MINOR.PATCH[-PRERELEASE] (required)")
	fl.StringVar(&f.opts.Registry.Name, "registry", "", "registry and path the images and the chart are pushed to (e.g. registry.example/estuary); empty: OCI layouts in --out")
	fl.BoolVar(&f.opts.Registry.Insecure, "insecure", false, "plain HTTP to the registry (always for localhost and loopback addresses)")
	fl.StringVar(&f.opts.Repo, "repo", ".", "the estuary checkout")
	fl.StringVar(&f.opts.Out, "out", "_output/release", "directory for the chart, the plugin archives, the krew manifest and OCI layouts")
	fl.StringVar(&f.helm, "helm", "bin/helm", "helm binary")
	fl.StringVar(&f.opts.Commit, "commit", "", "commit released (default: the checkout's HEAD)")
	fl.BoolVar(&f.allowDirty, "allow-dirty", false, "release a checkout with uncommitted changes, labelled <commit>-dirty")
	fl.StringVar(&f.opts.Source, "source", release.DefaultSource, "URL of the source repository (org.opencontainers.image.source)")
	fl.StringVar(&f.opts.DownloadURL, "download-url", "", "where the kubectl-estuary archives are published, for the krew manifest (default: <source>/releases/download/v<version>)")
	fl.StringSliceVar(&f.imagePlatforms, "image-platforms", platformNames(release.DefaultImagePlatforms), "platforms of the images")
	fl.StringSliceVar(&f.pluginPlatforms, "plugin-platforms", platformNames(release.DefaultPluginPlatforms), "platforms of the kubectl-estuary archives")
	return c
}

func run(cmd *cobra.Command, f *flags) error {
	o := f.opts
	if o.Version == "" {
		return errors.New("--release is required")
	}
	var err error
	if o.ImagePlatforms, err = parsePlatforms(f.imagePlatforms); err != nil {
		return err
	}
	if o.PluginPlatforms, err = parsePlatforms(f.pluginPlatforms); err != nil {
		return err
	}
	if o.Repo, err = filepath.Abs(o.Repo); err != nil {
		return fmt.Errorf("--repo: %w", err)
	}
	if err := source(cmd, &o, f.allowDirty); err != nil {
		return err
	}
	o.Helm = release.Helm{Bin: f.helm}
	o.Log = cmd.ErrOrStderr()
	r, err := release.Run(cmd.Context(), o)
	if err != nil {
		return err
	}
	return summary(cmd, o, r)
}

// source fills the commit and its date from the checkout. A tree with
// changes the commit does not hold is refused unless allowDirty, and then
// released labelled <commit>-dirty.
func source(cmd *cobra.Command, o *release.Options, allowDirty bool) error {
	if o.Commit == "" {
		out, err := git(o.Repo, "rev-parse", "HEAD")
		if err != nil {
			return err
		}
		o.Commit = out
	}
	out, err := git(o.Repo, "show", "-s", "--format=%ct", o.Commit)
	if err != nil {
		return err
	}
	secs, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		return fmt.Errorf("date of commit %s: %w", o.Commit, err)
	}
	o.Created = time.Unix(secs, 0).UTC()
	status, err := git(o.Repo, "status", "--porcelain")
	if err != nil || status == "" {
		return err
	}
	changed := changedFiles(status)
	if !allowDirty {
		return fmt.Errorf("the checkout %s has uncommitted changes (%s): commit or stash them, or pass --allow-dirty to release them labelled %s-dirty",
			o.Repo, changed, o.Commit)
	}
	o.Commit += "-dirty"
	_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "warning: the checkout has uncommitted changes (%s); the release is built from them and labelled %s\n", changed, o.Commit)
	return nil
}

// changedFiles names the first few files of `git status --porcelain`'s
// output, and how many more there are.
func changedFiles(status string) string {
	const shown = 5
	lines := strings.Split(status, "\n")
	names := make([]string, 0, shown)
	for _, l := range lines[:min(len(lines), shown)] {
		if len(l) > 3 {
			l = l[3:]
		}
		names = append(names, l)
	}
	out := strings.Join(names, ", ")
	if len(lines) > shown {
		out += fmt.Sprintf(" and %d more", len(lines)-shown)
	}
	return out
}

func git(repo string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).Output() //nolint:gosec // G204: fixed git queries
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	// Only trailing space: a status line starts with a space.
	return strings.TrimRight(string(out), " \t\r\n"), nil
}

func summary(cmd *cobra.Command, o release.Options, r release.Result) error {
	w := cmd.OutOrStdout()
	for _, name := range []string{release.ManagerImage.Name, release.DaemonImage.Name} {
		_, _ = fmt.Fprintf(w, "image\t%s\n", r.Images[name])
	}
	_, _ = fmt.Fprintf(w, "chart\t%s\n", r.Chart)
	if r.ChartRef != "" {
		_, _ = fmt.Fprintf(w, "chart\t%s --version %s\n", r.ChartRef, o.Version)
	}
	for _, a := range r.Archives {
		_, _ = fmt.Fprintf(w, "plugin\t%s\n", a.Path)
	}
	_, err := fmt.Fprintf(w, "checksums\t%s\nkrew\t%s\n", r.Checksums, r.KrewManifest)
	return err
}

func platformNames(ps []release.Platform) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

func parsePlatforms(names []string) ([]release.Platform, error) {
	out := make([]release.Platform, 0, len(names))
	for _, n := range names {
		p, err := release.ParsePlatform(n)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
