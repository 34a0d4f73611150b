package reactions

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// ParseAllow reads a salt-calls policy, as --salt-calls and salt_calls
// write it, into SaltCalls.Allow: "read-only" (ReadOnlySaltCalls), "off"
// (nil: nothing), or function globs joined by commas, read-only among
// them or not.
func ParseAllow(spec string) ([]string, error) {
	var allow []string
	for _, w := range strings.Split(spec, ",") {
		switch w = strings.TrimSpace(w); {
		case w == "" || w == "off":
			if spec = strings.TrimSpace(spec); spec == "off" || spec == "" {
				return nil, nil
			}
		case w == "read-only": // daemon.SaltCallsDefault
			allow = append(allow, ReadOnlySaltCalls...)
		default:
			if _, err := path.Match(w, "x.y"); err != nil || !strings.Contains(w, ".") && w != "*" {
				return nil, fmt.Errorf("%q is not a function glob (mod.fun, mod.*, saltutil.runner:jobs.*, read-only or off)", w)
			}
			allow = append(allow, w)
		}
	}
	slices.Sort(allow)
	return slices.Compact(allow), nil
}
