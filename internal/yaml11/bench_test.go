package yaml11

import "testing"

var benchSink int

// BenchmarkResolve types common reactor values the way callers do: switch
// on the result at once.
func BenchmarkResolve(b *testing.B) {
	for _, s := range []string{"web1", "1", "true", "salt/job/123/ret/web1", "nginx", "8080", "1.5", "2024-01-15"} {
		b.Run(s, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for i := 0; i < b.N; i++ {
				switch v := Resolve(s).(type) {
				case string:
					n += len(v)
				case int64:
					n += int(v)
				case bool:
					if v {
						n++
					}
				case float64:
					n += int(v)
				}
			}
			benchSink = n
		})
	}
}

// BenchmarkParseValue parses and builds a typical reaction.
func BenchmarkParseValue(b *testing.B) {
	src := []byte(`highstate_run:
  local.state.apply:
    - tgt: web1
    - args:
      - mods: nginx
      - pillar:
          port: 8080
          debug: off
          tags: [a, b, "c"]
`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		n, err := Parse(src)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := n.Value(); err != nil {
			b.Fatal(err)
		}
	}
}
