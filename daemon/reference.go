package daemon

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/reactord/reactord/config"
)

// WriteReference writes the configuration reference (docs/configuration.md):
// one row per daemon setting with its flag, reactord: key, environment
// variable, default and meaning, made from Options' flags so that it
// cannot drift from them.
func WriteReference(w io.Writer) error {
	o := Defaults()
	o.MasterID = "HOST_master" // the host's name: not this machine's in the docs
	fs := flag.NewFlagSet("reactord", flag.ContinueOnError)
	o.Flags(fs)
	var b strings.Builder
	b.WriteString(`# Configuration reference

Generated from the daemon's options (` + "`go test ./daemon -update`" + ` writes it again);
do not edit by hand.

Every setting of ` + "`reactord run`" + ` comes from, in order: its flag on the command
line, its environment variable, its key in the configuration's ` + "`reactord:`" + `
section, its default. A secret and its ` + "`*-file`" + ` flag are one setting: the one
the command line gives wins, else the secret's variable, else the section's
` + "`*_file`" + ` key (the section refuses the secrets themselves). ` + "`NATS_URL`" + ` is read
for ` + "`--nats`" + ` after ` + "`REACTORD_NATS`" + `. ` + "`reactord check -c CONF --settings`" + ` prints each
merged value and where it came from. A default is the value used when nothing
gives one; ` + "`auto`" + ` is a default decided at start, from other settings or the
machine, which the meaning's "auto:" says how (the setting accepts ` + "`auto`" + ` too).

| flag | reactord: key | environment | default | meaning |
|---|---|---|---|---|
`)
	fs.VisitAll(func(f *flag.Flag) {
		key := "`" + FileKey(f.Name) + "`"
		if why, ok := noFileKey[f.Name]; ok {
			key = "— (" + why + ")"
		}
		def := f.DefValue
		if def == "" {
			def = "—"
		}
		fmt.Fprintf(&b, "| `-%s` | %s | `%s` | `%s` | %s |\n", f.Name, key, EnvName(f.Name), def, strings.ReplaceAll(f.Usage, "|", `\|`))
	})
	b.WriteString("\nKeys of the section that are no daemon setting:\n\n| reactord: key | meaning |\n|---|---|\n")
	for _, k := range config.SettingKeys() {
		if fs.Lookup(config.FlagName(k)) == nil {
			fmt.Fprintf(&b, "| `%s` | %s |\n", k, fileOnly[k])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fileOnly says what the reactord: keys without a flag are for.
var fileOnly = map[string]string{
	"literal_target": "the default of every rule's `literal_target` option (rules follow reloads, so this key does too); `check`, `render`, `replay` and `explain` read it",
}

// noFileKey are the daemon flags the reactord: section has no key for, on
// purpose, and why.
var noFileKey = map[string]string{
	"c":                "the configuration itself",
	"v":                "log_level: debug",
	"dry-run":          "driver: dryrun",
	"nats-token":       "a secret: nats_token_file",
	"nats-password":    "a secret: nats_password_file",
	"saltapi-password": "a secret: saltapi_password_file",
	"saltapi-token":    "a secret: saltapi_token_file",
	"saltapi-insecure": "tests only",
	"stubs":            "a preview's answers (--dry-run), not a daemon's setting",
}
