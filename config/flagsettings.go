package config

import (
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/reactord/reactord/internal/yaml11"
)

// FlagSetting is a reactord: setting that stands for the daemon flag of
// the same name (the key's underscores are the flag's dashes): its value
// as the flag takes it, and where the file set it. A flag given on the
// command line wins over it.
type FlagSetting struct {
	// Value is the value in the flag's syntax: a string, true or false, a
	// decimal integer or a Go duration. Relative paths are resolved
	// against the folder of the file that set them.
	Value string
	// Pos is where the value is in the configuration.
	Pos Pos
}

// settingKind is the type and range of a flag setting, as its flag takes
// it.
type settingKind int

const (
	kindString           settingKind = iota
	kindPath                         // a file or folder, resolved against the configuration's folder
	kindBool                         // true or false
	kindCount                        // an integer, 0 or more
	kindPositive                     // an integer, 1 or more
	kindDuration                     // a Go duration, 0 or more
	kindPositiveDuration             // a Go duration, more than 0
	kindList                         // a string or a list of strings, joined with commas
)

// flagSettings are the reactord: keys that stand for a daemon flag, with
// the values the flag accepts. The others (nats, driver, data_dir,
// log_level, workers, settle, job_timeout, max_hops, store, store_file,
// keep_jobs, literal_target, jinja, renderer) have fields of their own in Settings.
var flagSettings = map[string]settingKind{
	// NATS
	"nats_token_file":    kindPath,
	"nats_user":          kindString,
	"nats_password_file": kindPath,
	"nats_nkey":          kindPath,
	"nats_creds":         kindPath,
	"nats_ca":            kindPath,
	"nats_cert":          kindPath,
	"nats_key":           kindPath,
	"listen":             kindString,
	"listen_open":        kindBool,
	"max_payload":        kindPositive,
	"jetstream":          kindBool,
	"ack_wait":           kindDuration,
	"jetstream_sync":     kindDuration,
	"dedupe_window":      kindDuration,
	"stream_replicas":    kindCount,
	"partitions":         kindCount,
	"dedupe_masters":     kindDuration,
	"dead_letter":        kindString,
	"parked_subject":     kindString,
	// the daemon
	"http":            kindString,
	"pprof":           kindBool,
	"log_format":      kindString,
	"queue":           kindCount,
	"in_flight":       kindCount,
	"hand_over_after": kindDuration,
	"drain_timeout":   kindPositiveDuration,
	"reload_settle":   kindDuration,
	"no_loop_guard":   kindBool,
	"shared_state":    kindBool,
	"start_broken":    kindBool,
	// the audit store
	"store_spool":  kindCount,
	"master_id":    kindString,
	"archive_all":  kindBool,
	"archive_tags": kindList,
	// drivers
	"exec_subject":          kindString,
	"saltapi_url":           kindString,
	"saltapi_user":          kindString,
	"saltapi_password_file": kindPath,
	"saltapi_eauth":         kindString,
	"saltapi_token_file":    kindPath,
	"saltapi_ca":            kindPath,
	"saltapi_max_in_flight": kindCount,
	"saltapi_max_batch":     kindCount,
	"saltapi_merge":         kindCount,
	"salt_bin":              kindString,
	"salt_run_bin":          kindString,
	"salt_call_bin":         kindString,
	"salt_config_dir":       kindPath,
	"exec_timeout":          kindDuration,
	"exec_kill_grace":       kindDuration,
	"exec_max_procs":        kindCount,
	"exec_coalesce":         kindCount,
	"master_uri":            kindString,
	"master_key_file":       kindPath,
	"master_user":           kindString,
	"master_sockets":        kindCount,
	"master_engine":         kindString,
	"salt_calls":            kindString,
}

// typedSettings are the keys with a field of their own in Settings.
var typedSettings = []string{"nats", "driver", "data_dir", "log_level", "workers", "settle", "job_timeout", "max_hops", "store", "store_file", "keep_jobs", "literal_target", "jinja", "renderer"}

// secretSettings are keys that would keep a secret in clear in the
// configuration: only their _file form is accepted.
var secretSettings = map[string]bool{"nats_token": true, "nats_password": true, "saltapi_password": true, "saltapi_token": true}

// SettingKeys lists every key of the reactord: section, sorted.
func SettingKeys() []string {
	keys := slices.Clone(typedSettings)
	for k := range flagSettings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// FlagName is the daemon flag a reactord: key stands for.
func FlagName(key string) string { return strings.ReplaceAll(key, "_", "-") }

// flagSetting checks the value of a flag setting as its flag would and
// records it; it reports false when k is no flag setting.
func (l *loader) flagSetting(cfg *Config, file, k string, kn, vn *yaml11.Node) bool {
	if secretSettings[k] {
		l.errorf(file, kn, "reactord.%s would keep a secret in clear in the configuration: put it in a file only reactord can read and give its path as %s_file", k, k)
		return true
	}
	kind, ok := flagSettings[k]
	if !ok {
		return false
	}
	var value string
	scalar := vn.Kind == yaml11.ScalarNode
	switch kind {
	case kindString, kindPath:
		s, ok := scalarString(vn)
		if !ok || s == "" {
			l.errorf(file, vn, "reactord.%s must be a non-empty string", k)
			return true
		}
		if kind == kindPath && !filepath.IsAbs(s) {
			s = filepath.Join(filepath.Dir(file), s)
		}
		value = s
	case kindBool:
		b, ok := yaml11.Resolve(vn.Text).(bool)
		if !scalar || !ok {
			l.errorf(file, vn, "reactord.%s must be true or false", k)
			return true
		}
		value = strconv.FormatBool(b)
	case kindCount, kindPositive:
		v, ok := yaml11.Resolve(vn.Text).(int64)
		switch {
		case !scalar || !ok:
			l.errorf(file, vn, "reactord.%s must be an integer", k)
			return true
		case v < 0:
			l.errorf(file, vn, "reactord.%s must not be negative (as --%s)", k, FlagName(k))
			return true
		case v == 0 && kind == kindPositive:
			l.errorf(file, vn, "reactord.%s must be more than 0 (as --%s)", k, FlagName(k))
			return true
		}
		value = strconv.FormatInt(v, 10)
	case kindDuration, kindPositiveDuration:
		s, ok := scalarString(vn)
		d, err := time.ParseDuration(s)
		switch {
		case !ok || err != nil:
			l.errorf(file, vn, "reactord.%s must be a duration such as 30s, 5m or 1h30m", k)
			return true
		case d < 0:
			l.errorf(file, vn, "reactord.%s must not be negative (as --%s)", k, FlagName(k))
			return true
		case d == 0 && kind == kindPositiveDuration:
			l.errorf(file, vn, "reactord.%s must be more than 0 (as --%s)", k, FlagName(k))
			return true
		}
		value = d.String()
	case kindList:
		value = strings.Join(l.stringList(file, vn, "reactord."+k), ",")
	}
	if cfg.Settings.Flags == nil {
		cfg.Settings.Flags = map[string]FlagSetting{}
	}
	cfg.Settings.Flags[FlagName(k)] = FlagSetting{Value: value, Pos: nodePos(file, vn)}
	return true
}

// storeHasPassword reports whether a store URL carries a password.
func storeHasPassword(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return false
	}
	_, set := u.User.Password()
	return set
}

// LogLevelNames are the log_level (--log-level) values reactord accepts,
// Salt's names in Salt's order.
var LogLevelNames = strings.Split(logLevelNames, ", ")
