package py

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reactord/reactord/event"
)

// TestPprint compares pyPprint with Python's pprint.pformat, recorded in
// testdata/pprint.txt: a JSON value line, then pformat's output, then a
// line "--".
func TestPprint(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "pprint.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cases := strings.Split(strings.TrimSuffix(string(raw), "--\n"), "--\n")
	if len(cases) < 5 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		in, want, _ := strings.Cut(c, "\n")
		want = strings.TrimSuffix(want, "\n")
		d, err := event.DecodeData([]byte(`{"v": ` + in + `}`))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		v := d["v"]
		if got := Text(pyPprint(v)); got != want {
			t.Errorf("pprint %s:\n got %s\nwant %s", in, got, want)
		}
	}
}
