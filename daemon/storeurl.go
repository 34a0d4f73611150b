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
		if u, err := settingsStore(cfg.Settings); err != nil || u != "" {
			return u, err
		}
		if dir == "" {
			dir = cfg.Settings.DataDir
		}
	}
	if dir == "" {
		dir = natsbus.DefaultDataDir()
	}
	return "sqlite://" + filepath.Join(dir, "reactord.db"), nil
}

// settingsStore is the store URL of the reactord: section: store, or the
// content of store_file; "" when neither is set.
func settingsStore(s config.Settings) (string, error) {
	if s.Store != "" || s.StoreFile == "" {
		return s.Store, nil
	}
	u, err := ReadSecretFile(s.StoreFile)
	if err != nil {
		return "", fmt.Errorf("reactord.store_file: %w", err)
	}
	return u, nil
}
