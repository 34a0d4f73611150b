package daemon

import (
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/reactord/reactord/config"
)

// TestHelpNamesEveryMember: the help texts that list the members of a
// list name each of them: every driver (each of which Driver knows), log
// level, log format and renderer.
func TestHelpNamesEveryMember(t *testing.T) {
	o := Defaults()
	fs := flag.NewFlagSet("reactord", flag.ContinueOnError)
	o.Flags(fs)
	usage := func(name string) string { return fs.Lookup(name).Usage }
	lists := []struct {
		flag    string
		members []string
	}{
		{"driver", config.DriverNames},
		{"log-level", config.LogLevelNames},
		{"renderer", config.Renderers},
	}
	for _, f := range LogFormats {
		lists = append(lists, struct {
			flag    string
			members []string
		}{"log-format", []string{f.Name}})
	}
	for _, l := range lists {
		for _, m := range l.members {
			if u := usage(l.flag); !strings.Contains(u, m+" (") && !strings.Contains(u, " "+m) && !strings.Contains(u, "("+m+": ") {
				t.Errorf("--%s's help does not name %s: %s", l.flag, m, usage(l.flag))
			}
		}
	}
	for _, name := range config.DriverNames {
		if driverHelp[name] == "" {
			t.Errorf("driver %s has no help (driverHelp)", name)
		}
		if _, err := o.Drivers.Driver(name, nil, nil); errors.Is(err, ErrUnknownDriver) {
			t.Errorf("--driver %s is in config.DriverNames but Driver does not know it", name)
		}
	}
	// The master driver reads --salt-config-dir too.
	if u := usage("salt-config-dir"); !strings.Contains(u, "master") {
		t.Errorf("--salt-config-dir's help leaves out the master driver: %s", u)
	}
}
