package daemon

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/reactord/reactord/config"
	"github.com/reactord/reactord/natsbus"
)

// StoreURL is the audit store a command that reads it (jobs, trace,
// events --since, shadow report) finds, as the daemon finds its own: url,
// else $REACTORD_STORE, else the store (or store_file) of the reactord:
// section of the configuration conf, else sqlite under dataDir, else under
// the configuration's data_dir, else under the default data directory.
func StoreURL(url, conf, dataDir string) (string, error) {
	if url != "" {
		return url, nil
	}
	if u := os.Getenv(EnvName("store")); u != "" {
		return u, nil
	}
	dir := dataDir
	if conf != "" {
		cfg, err := config.Load(conf)
		if err != nil {
			return "", fmt.Errorf("-c %s: %w", conf, err)
		}
		u, err := SecretValue(cfg.Settings.Store, "", cfg.Settings.StoreFile)
		if err != nil || u != "" {
			if err != nil {
				err = fmt.Errorf("reactord.store_file: %w", err)
			}
			return u, err
		}
		if dir == "" {
			dir = cfg.Settings.DataDir
		}
	}
	if dir == "" {
		dir = natsbus.DefaultDataDir()
	}
	return sqliteStore(dir), nil
}

// sqliteStore is the default store: SQLite in the data directory dir.
func sqliteStore(dir string) string { return "sqlite://" + filepath.Join(dir, "reactord.db") }
