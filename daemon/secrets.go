package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/reactord/reactord/natsbus"
)

// Secrets (passwords, tokens, store URLs holding a password) can be given
// three ways, so that none has to appear on a command line, where every
// local user sees it in ps:
//
//	--NAME VALUE       the flag itself (wins over the others)
//	--NAME-file PATH   a file holding the secret, read once at start, its
//	                   trailing newline dropped (systemd's LoadCredential=
//	                   puts one in $CREDENTIALS_DIRECTORY, %d in a unit)
//	$REACTORD_NAME     an environment variable (systemd's EnvironmentFile=)
//
// Merge applies that order to the daemon's settings; SecretValue to the
// other commands' flags.

// SecretValue returns a secret from, in order of precedence, its flag's
// value, the file named by its *-file flag, or the environment variable
// envName ("" when none is set). A file readable by its group or by others
// is read, with a warning.
func SecretValue(flagValue, envName, file string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if file != "" {
		return ReadSecretFile(file)
	}
	if envName != "" {
		return os.Getenv(envName), nil
	}
	return "", nil
}

// ErrEmptySecret reports a secret file holding nothing.
var ErrEmptySecret = errors.New("the file is empty")

// ReadSecretFile reads a secret from a file: its content without the
// trailing newline (or CRLF). An empty file is an error, since it stands
// for a secret forgotten.
//
// A file another local user could have written (owned by a user other
// than this one or root, or writable by its group or others) is refused,
// as ssh refuses such a key; a symbolic link is followed (mounted secrets
// are links) and its target checked.
func ReadSecretFile(path string) (string, error) {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		if err := natsbus.CheckPrivate(target); err != nil {
			return "", fmt.Errorf("secret file: %w", err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading secret: %w", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s: %w", path, ErrEmptySecret)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o044 != 0 {
		slog.Warn("secret file is readable by other users; chmod 600 it", "file", path, "mode", fmt.Sprintf("%#o", st.Mode().Perm()))
	}
	return s, nil
}
