package suggest

import "testing"

func TestClosest(t *testing.T) {
	words := []string{"dryrun", "saltapi", "exec", "nats", "null"}
	for _, tc := range []struct{ w, want string }{
		{"saltapii", "saltapi"}, {"salt-api", "saltapi"}, {"exce", "exec"}, {"nat", "nats"}, {"kafka", ""}, {"saltapi", "saltapi"},
	} {
		if got := Closest(tc.w, words); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.w, got, tc.want)
		}
	}
}
