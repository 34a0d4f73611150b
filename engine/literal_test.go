package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/reactions"
)

// literalSLS has one reaction whose target is printed from event data and
// one whose target is written in the file.
const literalSLS = `by_id:
  local.state.apply:
    - tgt: {{ .data.id }}
static_all:
  local.test.ping:
    - tgt: '*'
`

// TestLiteralTarget checks the literal_target rule option and its
// reactord-wide default: a forged id that widens the target refuses that
// reaction only (an error naming the file, the reaction, the value and the
// fix, logged and counted); a plain id, a static '*' and rules without the
// option react as Salt does.
func TestLiteralTarget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		conf    string
		id      string
		refused bool
	}{
		{"forged star", "reactor:\n  - 'x/*':\n      sls: x.sls\n      literal_target: true\n", "*", true},
		{"forged compound", "reactor:\n  - 'x/*':\n      sls: x.sls\n      literal_target: true\n", "web1 or G@os:Debian", true},
		{"forged range", "reactor:\n  - 'x/*':\n      sls: x.sls\n      literal_target: true\n", "web[1-9]", true},
		{"forged list", "reactor:\n  - 'x/*':\n      sls: x.sls\n      literal_target: true\n", "L@a,b", true},
		{"plain id", "reactor:\n  - 'x/*':\n      sls: x.sls\n      literal_target: true\n", "web1", false},
		{"fqdn", "reactor:\n  - 'x/*':\n      sls: x.sls\n      literal_target: true\n", "web-01.example.com", false},
		{"option off (Salt's behaviour)", "reactor:\n  - 'x/*': x.sls\n", "*", false},
		{"reactord default", "reactord:\n  literal_target: true\nreactor:\n  - 'x/*': x.sls\n", "*", true},
		{"rule overrides the default", "reactord:\n  literal_target: true\nreactor:\n  - 'x/*':\n      sls: x.sls\n      literal_target: false\n", "*", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range map[string]string{"reactor.conf": tc.conf, "x.sls": literalSLS} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := config.Load(filepath.Join(dir, "reactor.conf"))
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			eng := MustNew(cfg, Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
			res, err := eng.Process(context.Background(), event.Event{Tag: "x/1", Data: map[string]any{"id": tc.id}})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, c := range res.Chunks {
				ids = append(ids, c.Str("__id__"))
			}
			errs := res.Errors()
			if !tc.refused {
				if len(errs) != 0 || len(ids) != 2 {
					t.Fatalf("chunks %v, errors %v; want both reactions, no error", ids, errs)
				}
				return
			}
			if len(ids) != 1 || ids[0] != "static_all" {
				t.Errorf("chunks %v, want only static_all", ids)
			}
			if len(errs) != 1 {
				t.Fatalf("errors %v, want one refusal", errs)
			}
			var te *reactions.TargetError
			if !errors.As(errs[0], &te) || te.ID != "by_id" || te.Value != tc.id {
				t.Fatalf("error %v (%T), want a TargetError for by_id with value %q", errs[0], errs[0], tc.id)
			}
			msg := errs[0].Error()
			for _, want := range []string{filepath.Join(dir, "x.sls") + ":3:", `reaction "by_id" refused (literal_target)`, "tgt_type: list", "when:"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message lacks %q: %s", want, msg)
				}
			}
			if len(res.Files) != 2 || res.Files[0].Err != nil || res.Files[0].Reactions != 1 || res.Files[1].Err == nil || res.Files[1].Path != res.Files[0].Path {
				t.Errorf("files %+v, want the file's entry (1 reaction) then the refusal's", res.Files)
			}
			if got := eng.Stats().Errors.Load(); got != 1 {
				t.Errorf("Errors = %d, want 1", got)
			}
			if !strings.Contains(logs.String(), "reaction refused") || !strings.Contains(logs.String(), "by_id") {
				t.Errorf("refusal not logged:\n%s", logs.String())
			}
		})
	}
}

// TestLiteralTargetConfig checks the option's parsing.
func TestLiteralTargetConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ conf, want string }{
		{"reactor:\n  - 'x/*':\n      sls: x.sls\n      literal_target: maybe\n", "literal_target must be true or false"},
		{"reactord:\n  literal_target: [1]\nreactor:\n  - 'x/*': x.sls\n", "reactord.literal_target must be true or false"},
	} {
		p := filepath.Join(dir, "reactor.conf")
		if err := os.WriteFile(p, []byte(tc.conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.conf, err, tc.want)
		}
	}
}
