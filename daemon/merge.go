package daemon

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
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

// FileValues returns the values the reactord: section gives, by flag
// name: the flag settings as they are and the keys the section types
// itself (nats, driver, workers, ...) in their flag's syntax.
func FileValues(s config.Settings) map[string]config.FlagSetting {
	out := make(map[string]config.FlagSetting, len(s.Flags)+12)
	for k, v := range s.Flags {
		out[k] = v
	}
	set := func(name, value string) {
		if value != "" {
			out[name] = config.FlagSetting{Value: value}
		}
	}
	set("nats", s.NATS)
	set("driver", s.Driver)
	set("data-dir", s.DataDir)
	set("log-level", s.LogLevel)
	set("store", s.Store)
	set("store-file", s.StoreFile)
	if s.Workers != 0 {
		set("workers", strconv.Itoa(s.Workers))
	}
	if s.MaxHops != 0 {
		set("max-hops", strconv.Itoa(s.MaxHops))
	}
	if s.KeepJobs != 0 {
		set("keep-jobs", s.KeepJobs.String())
	}
	if s.Settle != 0 {
		set("settle", s.Settle.String())
	}
	if s.JobTimeout != 0 {
		set("job-timeout", s.JobTimeout.String())
	}
	set("renderer", s.Renderer)
	return out
}

// Merge fills every flag of fs that the command line did not give from
// its environment variable, else from the section's value in file (by
// flag name, as FileValues returns them). getenv is os.Getenv outside
// tests. It returns where each flag's value came from. A value that does
// not parse is an error naming the variable or the file position.
func Merge(fs *flag.FlagSet, file map[string]config.FlagSetting, getenv func(string) string) (map[string]Source, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name := range file {
		if fs.Lookup(name) == nil {
			s := file[name]
			return nil, fmt.Errorf("%s: reactord.%s is not a setting of this command", s.Pos, FileKey(name))
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
		if s, ok := file[name]; ok {
			if err := f.Value.Set(s.Value); err != nil {
				errs = append(errs, fmt.Errorf("%s: reactord.%s: %w", s.Pos, FileKey(name), err))
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
	sources, err := Merge(fs, FileValues(cfg.Settings), getenv)
	if err != nil {
		return nil, err
	}
	o.Loaded = cfg
	return sources, nil
}
