package engine

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/reactord/reactord/config"
)

// benchEngine builds an engine over a 60-rule configuration shaped like the
// shared replay workload.
func benchEngine(b *testing.B) *Engine {
	b.Helper()
	dir := b.TempDir()
	files := map[string]string{
		"highstate.sls": "highstate_on_start:\n  local.state.apply:\n    - tgt: {{ .data.id }}\n",
		"jobfail.sls": `{{ if and (not (dig "success" true .data)) (ne (dig "fun" "" .data) "saltutil.find_job") }}
notify_failure:
  runner.event.send:
    - args:
      - tag: myco/alert/job_failed
      - data:
          minion: {{ .data.id }}
          jid: '{{ .data.jid }}'
{{ end }}
`,
	}
	conf := "reactor:\n  - 'salt/minion/*/start': highstate.sls\n  - 'salt/job/*/ret/*': jobfail.sls\n"
	for i := 0; i < 58; i++ {
		conf += "  - 'myco/app" + strconv.Itoa(i) + "/*/event': highstate.sls\n"
	}
	files["reactor.conf"] = conf
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "reactor.conf"))
	if err != nil {
		b.Fatal(err)
	}
	return MustNew(cfg, Options{})
}

// BenchmarkProcessLine is one event end to end from its JSON line:
// envelope scan, match over 60 rules, data decoding, render and compile.
func BenchmarkProcessLine(b *testing.B) {
	cases := map[string]string{
		"unmatched":  `{"tag": "salt/job/20261122010001144547/new", "data": {"tgt_type": "glob", "jid": "20261122010001144547", "tgt": "*", "_stamp": "2026-11-22T01:00:01.148181", "user": "root", "arg": [], "fun": "test.ping", "minions": ["web1"]}}`,
		"job-ok":     `{"tag": "salt/job/20261122010001144547/ret/web1", "data": {"fun_args": [], "jid": "20261122010001144547", "return": true, "retcode": 0, "success": true, "cmd": "_return", "_stamp": "2026-11-22T01:00:01.218268", "fun": "test.ping", "id": "web1"}}`,
		"job-failed": `{"tag": "salt/job/20261122010010000001/ret/db1", "data": {"fun_args": ["exit 3"], "jid": "20261122010010000001", "return": "", "retcode": 3, "success": false, "cmd": "_return", "_stamp": "2026-11-22T01:00:10.100000", "fun": "cmd.run", "id": "db1"}}`,
		"start":      `{"tag": "salt/minion/web1/start", "data": {"_stamp": "2026-11-22T01:00:00.500000", "cmd": "_minion_event", "data": "Minion web1 started", "id": "web1", "pretag": null, "tag": "salt/minion/web1/start"}}`,
	}
	eng := benchEngine(b)
	ctx := context.Background()
	for name, line := range cases {
		b.Run(name, func(b *testing.B) {
			raw := []byte(line)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := eng.ProcessLine(ctx, raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
