//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing where the kernel has no parent-death signal:
// a bench killed with SIGKILL leaves its children running there.
func dieWithParent(*exec.Cmd) {}
