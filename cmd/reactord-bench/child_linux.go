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

// ownGroup starts cmd in a process group of its own, so that killGroup
// ends it with every process it forked (a database server's backends).
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// killGroup sends sig to the process group ownGroup gave pid.
func killGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// runAs has cmd run as the user uid and group gid.
func runAs(cmd *exec.Cmd, uid, gid uint32) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: gid}
}
