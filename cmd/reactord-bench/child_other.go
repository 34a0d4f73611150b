//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

// dieWithParent does nothing where the kernel has no parent-death signal:
// a bench killed with SIGKILL leaves its children running there.
func dieWithParent(*exec.Cmd) {}

// mountTmpfs is Linux's only.
func mountTmpfs(string, int64) error { return errors.New("tmpfs mounts need Linux") }

// unmount is Linux's only.
func unmount(string) error { return nil }
