package main

import (
	"flag"
	"fmt"
	"os"
	"sort"

	"github.com/reactord/reactord/config"
)

// fileSecretEnv names, for each secret file a reactord: section can give,
// the environment variable that holds the secret itself: as on the command
// line, the variable wins over the file the section names.
var fileSecretEnv = map[string]string{
	"saltapi-password-file": envSaltAPIPassword,
	"saltapi-token-file":    envSaltAPIToken,
	"nats-token-file":       envNATSToken,
	"nats-password-file":    envNATSPassword,
}

// applyFileSettings gives every flag of fs that the command line did not
// set (under its name or a former spelling) the value the reactord:
// section gives it. The section's values were checked at load as the flags
// check theirs; an error here names the value's position.
func applyFileSettings(fs *flag.FlagSet, settings map[string]config.FlagSetting) error {
	given := map[flag.Value]bool{}
	fs.Visit(func(f *flag.Flag) {
		v := f.Value
		switch a := v.(type) {
		case hiddenAlias:
			v = a.Value
		case hiddenBoolAlias:
			v = a.Value
		}
		given[v] = true
	})
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := settings[name]
		f := fs.Lookup(name)
		if f == nil {
			return fmt.Errorf("%s: reactord.%s is not a setting of this command", s.Pos, name)
		}
		if given[f.Value] {
			continue
		}
		if env := fileSecretEnv[name]; env != "" && os.Getenv(env) != "" {
			continue
		}
		if err := f.Value.Set(s.Value); err != nil {
			return fmt.Errorf("%s: %w", s.Pos, err)
		}
	}
	return nil
}
