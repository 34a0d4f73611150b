package daemon

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/reactord/reactord/config"
)

// The one merge rule: a setting's value comes from, in order, its flag on
// the command line, its environment variable (EnvName), its key in the
// configuration's reactord: section (the flag's name with underscores),
// and its default.
//
// A secret and its *-file flag are one setting: whichever of the two the
// command line gives wins; else the secret's variable ($REACTORD_STORE,
// $REACTORD_NATS_TOKEN, ...); else the section's *_file key (the section
// refuses the secrets themselves).

// Source says where a setting's value came from.
type Source string

// The sources of a setting, in the merge rule's order.
const (
	FromFlag    Source = "flag"
	FromEnv     Source = "env"
	FromFile    Source = "file"
	FromDefault Source = "default"
)

// secretFiles pairs each secret flag with the flag naming a file that
// holds it.
var secretFiles = map[string]string{
	"nats-token":       "nats-token-file",
	"nats-password":    "nats-password-file",
	"saltapi-password": "saltapi-password-file",
	"saltapi-token":    "saltapi-token-file",
	"store":            "store-file",
}

// secretOf is the reverse of secretFiles.
var secretOf = func() map[string]string {
	m := map[string]string{}
	for s, f := range secretFiles {
		m[f] = s
	}
	return m
}()

// envNames are the variables that do not follow REACTORD_<FLAG>.
var envNames = map[string]string{"c": "REACTORD_CONFIG", "v": "REACTORD_VERBOSE"}

// EnvName is the environment variable of a flag: REACTORD_ and the flag's
// name in capitals, dashes as underscores (--nats-token-file:
// REACTORD_NATS_TOKEN_FILE). --nats also reads NATS_URL, the NATS tools'
// variable, after REACTORD_NATS.
func EnvName(flagName string) string {
	if n, ok := envNames[flagName]; ok {
		return n
	}
	return "REACTORD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// lookupEnv returns a flag's variable, and NATS_URL for --nats.
func lookupEnv(getenv func(string) string, flagName string) (string, string) {
	name := EnvName(flagName)
	if v := getenv(name); v != "" {
		return name, v
	}
	if flagName == "nats" {
		if v := getenv("NATS_URL"); v != "" {
			return "NATS_URL", v
		}
	}
	return name, ""
}

// FileKey is the reactord: key of a flag.
func FileKey(flagName string) string { return strings.ReplaceAll(flagName, "-", "_") }

// sectionSettings are the reactord: keys that config reads into typed
// fields of Settings, by flag name: each puts the section's value, parsed
// once by config, into its option as it is, and reports whether the
// section sets it. The section's other keys (Settings.Flags) are in their
// flag's syntax and go through their flag.
var sectionSettings = map[string]func(o *Options, s *config.Settings) bool{
	"nats":        func(o *Options, s *config.Settings) bool { return take(&o.NATS.URL, s.NATS) },
	"driver":      func(o *Options, s *config.Settings) bool { return take(&o.Driver, s.Driver) },
	"data-dir":    func(o *Options, s *config.Settings) bool { return take(&o.DataDir, s.DataDir) },
	"log-level":   func(o *Options, s *config.Settings) bool { return take(&o.LogLevel, s.LogLevel) },
	"store":       func(o *Options, s *config.Settings) bool { return take(&o.Store, s.Store) },
	"store-file":  func(o *Options, s *config.Settings) bool { return take(&o.StoreFile, s.StoreFile) },
	"workers":     func(o *Options, s *config.Settings) bool { return take(&o.Workers, s.Workers) },
	"max-hops":    func(o *Options, s *config.Settings) bool { return take(&o.MaxHops, s.MaxHops) },
	"keep-jobs":   func(o *Options, s *config.Settings) bool { return take(&o.KeepJobs, s.KeepJobs) },
	"settle":      func(o *Options, s *config.Settings) bool { return take(&o.Settle, s.Settle) },
	"job-timeout": func(o *Options, s *config.Settings) bool { return take(&o.JobTimeout, s.JobTimeout) },
	"renderer": func(o *Options, s *config.Settings) bool {
		return take(&o.Renderer, RendererMode(s.Renderer))
	},
}

// take sets *dst to v unless v is its type's zero value (the section does
// not set it), and reports whether it did.
func take[T comparable](dst *T, v T) bool {
	var zero T
	if v == zero {
		return false
	}
	*dst = v
	return true
}

// Merge fills every option of o that the command line did not give (fs,
// the flag set o.Flags registered, parsed) from its environment variable,
// else from the configuration's reactord: section s: the keys config
// typed, as they are (sectionSettings), the others through their flag.
// This is the one place a setting's sources meet. getenv is os.Getenv
// outside tests. It returns where each flag's value came from. A value
// that does not parse is an error naming the variable or the file
// position.
func Merge(o *Options, fs *flag.FlagSet, s config.Settings, getenv func(string) string) (map[string]Source, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, v := range s.Flags {
		if fs.Lookup(name) == nil {
			return nil, fmt.Errorf("%s: reactord.%s is not a setting of this command", v.Pos, FileKey(name))
		}
	}
	sources := map[string]Source{}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name := f.Name
		pair := secretFiles[name]
		if pair == "" {
			pair = secretOf[name]
		}
		switch {
		case given[name]:
			sources[name] = FromFlag
			return
		case pair != "" && given[pair]:
			sources[name] = FromDefault // the command line gave the other spelling
			return
		}
		if env, v := lookupEnv(getenv, name); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("$%s: %w", env, err))
			}
			sources[name] = FromEnv
			return
		}
		if secret := secretOf[name]; secret != "" {
			if _, v := lookupEnv(getenv, secret); v != "" {
				sources[name] = FromDefault // the secret's variable wins over the section's file
				return
			}
		}
		if take := sectionSettings[name]; take != nil && take(o, &s) {
			sources[name] = FromFile
			return
		}
		if v, ok := s.Flags[name]; ok {
			if err := f.Value.Set(v.Value); err != nil {
				errs = append(errs, fmt.Errorf("%s: reactord.%s: %w", v.Pos, FileKey(name), err))
			}
			sources[name] = FromFile
			return
		}
		sources[name] = FromDefault
	})
	return sources, errors.Join(errs...)
}

// secretFlag reports whether a flag holds a secret (its value is not
// printed).
func secretFlag(name string) bool { _, ok := secretFiles[name]; return ok }

// Setting is one merged setting, for `check --settings`.
type Setting struct {
	Flag, Key, Env string
	Value          string
	Source         Source
}

// Settings lists fs's flags with their merged values and sources, sorted
// by flag name; secrets show as "(set)".
func Settings(fs *flag.FlagSet, sources map[string]Source) []Setting {
	var out []Setting
	fs.VisitAll(func(f *flag.Flag) {
		v := f.Value.String()
		if secretFlag(f.Name) && v != "" {
			v = "(set)"
		}
		out = append(out, Setting{Flag: f.Name, Key: FileKey(f.Name), Env: EnvName(f.Name), Value: v, Source: sources[f.Name]})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Flag < out[j].Flag })
	return out
}

// ErrNoConfig reports a daemon given no configuration (-c or
// $REACTORD_CONFIG).
var ErrNoConfig = errors.New("need -c CONF")

// Load completes options whose flags fs parsed: it reads the
// configuration -c (else $REACTORD_CONFIG) names into o.Loaded and merges
// the environment and its reactord: section into the flags the command
// line did not give (Merge). It returns where each setting came from. A
// configuration that does not load is a *LoadError.
func Load(o *Options, fs *flag.FlagSet, getenv func(string) string) (map[string]Source, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if o.Config == "" {
		o.Config = getenv(EnvName("c"))
	}
	if o.Config == "" {
		return nil, ErrNoConfig
	}
	cfg, err := config.Load(o.Config)
	if err != nil {
		return nil, &LoadError{err}
	}
	sources, err := Merge(o, fs, cfg.Settings, getenv)
	if err != nil {
		return nil, err
	}
	o.Loaded = cfg
	return sources, nil
}
