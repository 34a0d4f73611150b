package execdriver_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/reactord/reactord/actions/execdriver"
	"github.com/reactord/reactord/event"
)

// TestRecordedSaltOutputs runs stand-ins that print exactly what real Salt
// 3006.8 and 3007.1 printed (testdata/salt/<version>/salt_*.txt, recorded on
// a real master) and checks the driver reads the same jid out of them.
func TestRecordedSaltOutputs(t *testing.T) {
	jidOf := regexp.MustCompile(`[0-9]{20}`)
	for _, v := range []string{"3006.8", "3007.1"} {
		dir := filepath.Join("..", "..", "testdata", "salt", v)
		cases := []struct {
			file, prog, stream string
			c                  *event.Chunk
			noMinions          bool
		}{
			{"salt_async_local.txt", "salt", "stdout", chunk("local", "state.apply", "tgt", "web1"), false},
			{"salt_async_list.txt", "salt", "stdout", chunk("local", "test.ping", "tgt", []any{"web1", "web2"}, "tgt_type", "list"), false},
			{"salt_async_nomatch.txt", "salt", "stdout", chunk("local", "test.ping", "tgt", "nosuchminion"), true},
			{"salt_async_nomatch_glob.txt", "salt", "stdout", chunk("local", "test.ping", "tgt", "nomatch*"), true},
			// salt-run --async logs its tag as a warning on stderr.
			{"salt_run_async.txt", "salt-run", "stderr", chunk("runner", "test.arg", "arg", []any{"a"}), false},
		}
		for _, c := range cases {
			t.Run(v+"/"+c.file, func(t *testing.T) {
				path, _ := filepath.Abs(filepath.Join(dir, c.file))
				out, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				f := newFakeSalt(t)
				redirect := ""
				if c.stream == "stderr" {
					redirect = " >&2"
				}
				f.script(t, c.prog, "cat "+shq(path)+redirect+"\n")
				d := f.driver(t, f.config())
				res, err := do(d, c.c)
				if c.noMinions {
					if !errors.Is(err, execdriver.ErrNoMinions) {
						t.Fatalf("err = %v, want ErrNoMinions", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if want := jidOf.FindString(string(out)); want == "" || res.JID != want {
					t.Fatalf("jid %q, the recording says %q", res.JID, want)
				}
			})
		}
	}
}
