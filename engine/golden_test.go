package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/schemas"
)

var update = flag.Bool("update", false, "rewrite golden files with the current output")

// archive is a minimal txtar-style file: a comment, then sections that
// start with a line "-- NAME --".
type archive struct {
	comment string
	files   []archiveFile
}

type archiveFile struct {
	name string
	data string
}

func parseArchive(src string) archive {
	var a archive
	lines := strings.SplitAfter(src, "\n")
	cur := -1
	var b strings.Builder
	flush := func() {
		if cur < 0 {
			a.comment = b.String()
		} else {
			a.files[cur].data = b.String()
		}
		b.Reset()
	}
	for _, l := range lines {
		t := strings.TrimRight(l, "\n")
		if strings.HasPrefix(t, "-- ") && strings.HasSuffix(t, " --") && len(t) > 6 {
			flush()
			a.files = append(a.files, archiveFile{name: strings.TrimSpace(t[3 : len(t)-3])})
			cur = len(a.files) - 1
			continue
		}
		b.WriteString(l)
	}
	flush()
	return a
}

func (a archive) format() string {
	var b strings.Builder
	b.WriteString(a.comment)
	for _, f := range a.files {
		fmt.Fprintf(&b, "-- %s --\n%s", f.name, f.data)
		if f.data != "" && !strings.HasSuffix(f.data, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func (a *archive) get(name string) (string, bool) {
	for _, f := range a.files {
		if f.name == name {
			return f.data, true
		}
	}
	return "", false
}

func (a *archive) set(name, data string) {
	for i := range a.files {
		if a.files[i].name == name {
			a.files[i].data = data
			return
		}
	}
	a.files = append(a.files, archiveFile{name: name, data: data})
}

func (a *archive) remove(name string) {
	for i := range a.files {
		if a.files[i].name == name {
			a.files = append(a.files[:i], a.files[i+1:]...)
			return
		}
	}
}

// TestGolden runs every testdata/golden/*.txt case: the files of the case
// (reactor.conf, reaction files, event.json) are written to a temporary
// directory, the event is processed, and the chunks (want.json) and errors
// (want.err, with the directory spelled $DIR) are compared. Run with
// -update to rewrite the expectations.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			a := parseArchive(string(src))
			dir := t.TempDir()
			for _, f := range a.files {
				if strings.HasPrefix(f.name, "want.") || f.name == "event.json" {
					continue
				}
				p := filepath.Join(dir, f.name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(f.data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			evText, ok := a.get("event.json")
			if !ok {
				t.Fatal("case has no event.json")
			}
			ev, err := event.Decode([]byte(evText))
			if err != nil {
				t.Fatalf("event.json: %v", err)
			}
			if err := schemas.Validate(schemas.Event, toPlain(t, evText)); err != nil {
				t.Fatalf("event.json does not satisfy the event schema: %v", err)
			}
			confPath := filepath.Join(dir, "reactor.conf")
			if _, ok := a.get("master.d/reactor.conf"); ok {
				confPath = filepath.Join(dir, "master.d")
			}
			if _, ok := a.get("master"); ok {
				confPath = filepath.Join(dir, "master")
			}
			var gotErr strings.Builder
			var gotJSON string
			cfg, err := config.Load(confPath)
			if err != nil {
				fmt.Fprintf(&gotErr, "config: %v\n", err)
				gotJSON = "[]\n"
			} else {
				for _, w := range cfg.Warnings {
					fmt.Fprintf(&gotErr, "warning: %v\n", w)
				}
				res, err := MustNew(cfg, Options{}).Process(context.Background(), ev)
				if err != nil {
					t.Fatalf("process: %v", err)
				}
				if res.Skipped != "" {
					fmt.Fprintf(&gotErr, "skipped: %s\n", res.Skipped)
				}
				for _, w := range res.Warnings {
					fmt.Fprintf(&gotErr, "warning: %v\n", w)
				}
				for _, e := range res.Errors() {
					fmt.Fprintf(&gotErr, "%v\n", e)
				}
				gotJSON = chunksJSON(t, res.Chunks)
				for i, c := range res.Chunks {
					raw, _ := json.Marshal(c)
					if err := schemas.Validate(schemas.LowChunk, toPlain(t, string(raw))); err != nil {
						// Salt compiles chunks it will refuse to execute;
						// report them, but only as part of the errors.
						fmt.Fprintf(&gotErr, "chunk %d fails the low-chunk schema: %v\n", i, err)
					}
				}
			}
			errText := strings.ReplaceAll(gotErr.String(), dir, "$DIR")
			gotJSON = strings.ReplaceAll(gotJSON, dir, "$DIR")
			wantJSON, _ := a.get("want.json")
			wantErr, _ := a.get("want.err")
			if *update {
				a.set("want.json", gotJSON)
				if errText != "" {
					a.set("want.err", errText)
				} else {
					a.remove("want.err")
				}
				if err := os.WriteFile(file, []byte(a.format()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !jsonEqual(t, wantJSON, gotJSON) {
				t.Errorf("chunks differ\n--- want\n%s\n--- got\n%s", wantJSON, gotJSON)
			}
			if strings.TrimSpace(wantErr) != strings.TrimSpace(errText) {
				t.Errorf("errors differ\n--- want\n%s\n--- got\n%s", wantErr, errText)
			}
		})
	}
}

func chunksJSON(t *testing.T, chunks []*event.Chunk) string {
	t.Helper()
	list := make([]any, len(chunks))
	for i, c := range chunks {
		list[i] = c
	}
	raw, err := event.AppendJSON(nil, list)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	return b.String() + "\n"
}

func toPlain(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
	return v
}

// jsonEqual compares two JSON texts as values (object key order ignored,
// array order significant).
func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	if strings.TrimSpace(a) == "" {
		a = "[]"
	}
	va, vb := toPlain(t, a), toPlain(t, b)
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}
