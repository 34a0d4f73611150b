//go:build unix

package execdriver

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup starts the child as the leader of a new process group,
// so a signal reaches everything it started (salt forks helpers).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends SIGTERM, or SIGKILL when kill is set, to the process
// group led by p.
func signalGroup(p *os.Process, kill bool) error {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	return syscall.Kill(-p.Pid, sig)
}
