package main

import (
	"os/exec"
	"strconv"
	"syscall"
)

// dieWithParent has the kernel SIGKILL the child cmd starts when reactord
// dies, so that a bench killed with SIGKILL leaves no daemons, NATS nodes
// or publishers running behind it.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// mountTmpfs mounts a tmpfs of size bytes on dir (soak --tmpfs: a data
// directory that can be filled); it needs root.
func mountTmpfs(dir string, size int64) error {
	return syscall.Mount("tmpfs", dir, "tmpfs", 0, "mode=0700,size="+strconv.FormatInt(size, 10))
}

// unmount detaches what mountTmpfs mounted, even while files are open.
func unmount(dir string) error { return syscall.Unmount(dir, syscall.MNT_DETACH) }
