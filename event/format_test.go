package event

import "testing"

// TestEventFormats: --out names a format (jobs' text is events' pretty).
func TestEventFormats(t *testing.T) {
	t.Parallel()
	ev := Event{Tag: "a/b", Data: map[string]any{"id": "web1", "n": int64(2)}}
	cases := []struct{ out, want string }{
		{"", "a/b\t{\n    \"id\": \"web1\",\n    \"n\": 2\n}\n"},
		{"pretty", "a/b\t{\n    \"id\": \"web1\",\n    \"n\": 2\n}\n"},
		{"text", "a/b\t{\n    \"id\": \"web1\",\n    \"n\": 2\n}\n"},
		{"json", `{"tag":"a/b","data":{"id":"web1","n":2}}` + "\n"},
	}
	for _, c := range cases {
		f, err := Format(c.out)
		if err != nil {
			t.Fatalf("--out %q: %v", c.out, err)
		}
		if got, err := f(ev, ""); err != nil || string(got) != c.want {
			t.Errorf("--out %q: %q (%v), want %q", c.out, got, err, c.want)
		}
	}
	// An archived event's id (events --since, issue 10 #10).
	if got, _ := mustFormat(t, "pretty")(ev, "ev-1"); string(got) != "# event_id=ev-1\n"+cases[0].want {
		t.Errorf("pretty with an id: %q", got)
	}
	if got, _ := mustFormat(t, "json")(ev, "ev-1"); string(got) != `{"tag":"a/b","data":{"id":"web1","n":2},"event_id":"ev-1"}`+"\n" {
		t.Errorf("json with an id: %q", got)
	}
	if _, err := Format("yaml"); err == nil {
		t.Error("--out yaml accepted")
	}
}

func mustFormat(t *testing.T, name string) Formatter {
	t.Helper()
	f, err := Format(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
