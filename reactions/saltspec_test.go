package reactions

import (
	"slices"
	"testing"
)

// TestParseAllow: the salt-calls policies read as --salt-calls reads them.
func TestParseAllow(t *testing.T) {
	if got, err := ParseAllow("off"); err != nil || got != nil {
		t.Errorf("off: %v, %v", got, err)
	}
	got, err := ParseAllow("read-only, cmd.run")
	if err != nil || !slices.Contains(got, "cmd.run") || !slices.Contains(got, "pillar.get") || len(got) != len(ReadOnlySaltCalls)+1 {
		t.Errorf("read-only, cmd.run: %v, %v", got, err)
	}
	if got, err := ParseAllow("state.*"); err != nil || !slices.Equal(got, []string{"state.*"}) {
		t.Errorf("state.*: %v, %v", got, err)
	}
	for _, bad := range []string{"cmd", "[.x"} {
		if _, err := ParseAllow(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
