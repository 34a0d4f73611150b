package main

import (
	"os/exec"
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
