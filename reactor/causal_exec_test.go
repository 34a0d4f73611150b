package reactor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/actions/execdriver"
)

// execMaster writes stand-ins for salt and salt-run that start no job but
// print the next job ID of the scenario's master (j1, j2, …) the way Salt
// prints it, so the exec driver reads it as from real Salt.
func execMaster(t *testing.T) execdriver.Config {
	t.Helper()
	dir := t.TempDir()
	next := "n=$(flock " + filepath.Join(dir, "lock") + " sh -c 'n=$(($(cat " + filepath.Join(dir, "n") + " 2>/dev/null || echo 0) + 1)); echo $n > " + filepath.Join(dir, "n") + "; echo $n')\n" +
		"jid=$(printf '20261126%012d' \"$n\")\n"
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+next+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return execdriver.Config{
		Salt:     write("salt", "echo \"Executed command with job ID: $jid\"\n"),
		SaltRun:  write("salt-run", "echo \"[WARNING ] Running in asynchronous mode. This execution is running under tag salt/run/$jid\" >&2\n"),
		SaltCall: write("salt-call", "echo local: true\n"),
		// One reaction per run, as the scenarios' jids count reactions.
		MaxCoalesce: 1,
		MaxProcs:    1,
	}
}

// countingDriver records each dispatch's reaction ID, as saltDriver does,
// and hands the action to the real driver.
type countingDriver struct {
	saltDriver
	actions.Driver
}

func (c *countingDriver) Name() string                    { return c.Driver.Name() }
func (c *countingDriver) Supports(s string) bool          { return c.Driver.Supports(s) }
func (c *countingDriver) Close(ctx context.Context) error { return c.Driver.Close(ctx) }

func (c *countingDriver) Do(ctx context.Context, a actions.Action) (actions.Result, error) {
	r, err := c.Driver.Do(ctx, a)
	c.mu.Lock()
	c.calls = append(c.calls, a.Chunk.Str("__id__")+" "+r.JID)
	c.mu.Unlock()
	return r, err
}

// TestLoopGuardScenariosExec runs the matrix through the exec driver:
// the job IDs the loop guard links returns by come from the output of
// real processes, parsed as the driver parses Salt's.
func TestLoopGuardScenariosExec(t *testing.T) {
	for _, c := range loopGuardScenarios {
		if c.noJID {
			continue // --dry-run's driver, not exec
		}
		t.Run(c.name, func(t *testing.T) {
			cfg := execMaster(t)
			synctest.Test(t, func(t *testing.T) {
				ex, err := execdriver.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				drv := &countingDriver{Driver: ex}
				c.run(t, drv, &drv.saltDriver)
			})
		})
	}
}
