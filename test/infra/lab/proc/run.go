package proc

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"github.com/vishvananda/netns"
)

// RunMain implements `estuary-lab _run [--cgroup C] [--netns P] [--join-pid N] -- argv`:
// join cgroup C in every hierarchy, enter the namespaces, exec argv. It only
// returns on failure.
func RunMain(args []string) error {
	fs := flag.NewFlagSet(RunCommand, flag.ContinueOnError)
	cg := fs.String("cgroup", "", "cgroup path below every hierarchy root")
	nsPath := fs.String("netns", "", "network namespace to enter")
	join := fs.Int("join-pid", 0, "enter the mount, network and UTS namespaces of this pid")
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return fmt.Errorf("%s: no program given", RunCommand)
	}
	if *cg != "" {
		if err := JoinCgroup(*cg, os.Getpid()); err != nil {
			return err
		}
	}
	runtime.LockOSThread() // the namespace below must be the exec'ing thread's
	if *nsPath != "" {
		h, err := netns.GetFromPath(*nsPath)
		if err != nil {
			return fmt.Errorf("open netns %s: %w", *nsPath, err)
		}
		if err := netns.Set(h); err != nil {
			return fmt.Errorf("enter netns %s: %w", *nsPath, err)
		}
	}
	if *join != 0 {
		// Entering a mount namespace needs a single-threaded process: nsenter does it.
		p := strconv.Itoa(*join)
		argv = append([]string{"nsenter", "--mount=/proc/" + p + "/ns/mnt",
			"--net=/proc/" + p + "/ns/net", "--uts=/proc/" + p + "/ns/uts", "--"}, argv...)
	}
	bin, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("find %s: %w", argv[0], err)
	}
	if err := syscall.Exec(bin, argv, os.Environ()); err != nil { //nolint:gosec // G204: runs programs the lab located itself
		return fmt.Errorf("exec %s: %w", bin, err)
	}
	return nil
}
