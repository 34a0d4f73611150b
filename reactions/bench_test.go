package reactions

import (
	"testing"
)

const benchTemplate = `{{ if and (not (dig "success" true .data)) (ne (dig "fun" "" .data) "saltutil.find_job") }}
notify_failure:
  runner.event.send:
    - args:
      - tag: myco/alert/job_failed
      - data:
          minion: {{ .data.id }}
          jid: '{{ .data.jid }}'
          fun: {{ .data.fun }}
          retcode: {{ dig "retcode" 1 .data }}
{{ end }}
`

func benchData() map[string]any {
	return map[string]any{"fun_args": []any{}, "jid": "20261122010010000001", "return": "", "retcode": int64(3),
		"success": false, "cmd": "_return", "_stamp": "2026-11-22T01:00:10.100000", "fun": "cmd.run", "id": "db1"}
}

// BenchmarkRender renders a reaction file for one event: template
// execution, skeleton lookup and materialization with pad_funcs.
func BenchmarkRender(b *testing.B) {
	f, err := ParseFile("/srv/reactor/alert.sls", []byte(benchTemplate))
	if err != nil {
		b.Fatal(err)
	}
	data := benchData()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rs, err := f.Render("salt/job/20261122010010000001/ret/db1", data)
			if err != nil || len(rs) != 1 {
				b.Fatalf("%v %v", rs, err)
			}
		}
	})
}

// BenchmarkCompile runs verify_high, compile_high_data and ordering over
// a rendered reaction.
func BenchmarkCompile(b *testing.B) {
	f, err := ParseFile("/srv/reactor/alert.sls", []byte(benchTemplate))
	if err != nil {
		b.Fatal(err)
	}
	data := benchData()
	b.ReportAllocs()
	for b.Loop() {
		rs, _ := f.Render("salt/job/1/ret/db1", data)
		var h High
		h.Add(rs)
		if errs := h.Verify(); len(errs) > 0 {
			b.Fatal(errs)
		}
		if len(h.Compile()) != 1 {
			b.Fatal("no chunk")
		}
	}
}

// BenchmarkParseSkeleton is the cost a new shape pays once: parsing the
// rendered YAML into a skeleton.
func BenchmarkParseSkeleton(b *testing.B) {
	text := []byte("notify_failure:\n  runner.event.send:\n    - args:\n      - tag: myco/alert/job_failed\n      - data:\n          minion: " + sentinel + "0_\n          jid: '" + sentinel + "1_'\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseSkeleton(text); err != nil {
			b.Fatal(err)
		}
	}
}
