//go:build !unix

package execdriver

import (
	"os"
	"os/exec"
)

// setProcessGroup does nothing where process groups do not exist.
func setProcessGroup(*exec.Cmd) {}

// signalGroup kills p itself where there are no process groups and no
// SIGTERM; the grace period is then not used.
func signalGroup(p *os.Process, _ bool) error { return p.Kill() }
