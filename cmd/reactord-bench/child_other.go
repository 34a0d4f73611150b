//go:build !linux

package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// dieWithParent does nothing where the kernel has no parent-death signal:
// a bench killed with SIGKILL leaves its children running there.
func dieWithParent(*exec.Cmd) {}

// mountTmpfs is Linux's only.
func mountTmpfs(string, int64) error { return errors.New("tmpfs mounts need Linux") }

// unmount is Linux's only.
func unmount(string) error { return nil }

// ownGroup does nothing here: killGroup ends the process alone.
func ownGroup(*exec.Cmd) {}

// killGroup sends sig to the process pid (no process groups here).
func killGroup(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}

// runAs does nothing here: the process runs as the soak's user.
func runAs(*exec.Cmd, uint32, uint32) {}
