package matchers

import "testing"

var benchSink bool

func BenchmarkGlobMatch(b *testing.B) {
	cases := []struct {
		name, pattern, tag string
	}{
		{"literal", "salt/presence/change", "salt/presence/change"},
		{"job_ret", "salt/job/*/ret/*", "salt/job/20261122010001144547/ret/web1"},
		{"class_alert", "myco/svc7/[ab]*/alert?", "myco/svc7/api/x/alert9"},
		{"miss_prefix", "myco/deploy/*/done", "salt/job/20261122010001144547/ret/web1"},
		{"many_stars", "*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
	}
	for _, c := range cases {
		g := Compile(c.pattern)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchSink = g.Match(c.tag)
			}
		})
	}
}

func BenchmarkTableMatch(b *testing.B) {
	tbl := NewTable(benchPatterns())
	cases := []struct{ name, tag string }{
		{"job_ret", "salt/job/20261122010001144547/ret/web1"},
		{"svc_alert", "myco/svc7/api/alert1"},
		{"app_event", "myco/app8/x/event"},
		{"miss", "myco/unknown/thing"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			dst := make([]int, 0, tbl.Len())
			for b.Loop() {
				dst = tbl.Match(c.tag, dst[:0])
			}
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = Compile("myco/svc7/[ab]*/alert?")
	}
}
