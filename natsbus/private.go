package natsbus

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotPrivate marks a data directory, token or address file another
// local user could have planted or could change: owned by a user other
// than this one or root, writable by its group or others, or a symbolic
// link. It is refused, as ssh refuses such a key.
var ErrNotPrivate = errors.New("not private")

// CheckPrivate refuses path when another local user could have planted
// it or could change it (ErrNotPrivate); a missing path is fs.ErrNotExist.
func CheckPrivate(path string) error { return checkFile(path, true) }

// checkFile is CheckPrivate; without owner, a file of any owner passes
// (the packaged service's data directory, which belongs to its user).
func checkFile(path string, owner bool) error {
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: %w", path, ErrNotPrivate)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && owner {
		if uid := int(sys.Uid); uid != os.Getuid() && uid != 0 {
			return fmt.Errorf("%s belongs to user %d, not to this user (%d) or root: %w", path, uid, os.Getuid(), ErrNotPrivate)
		}
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by its group or others (mode %04o; chmod go-w it): %w", path, st.Mode().Perm(), ErrNotPrivate)
	}
	return nil
}

// EnsurePrivateDir creates dir (mode 0700) when it is missing and refuses
// it when it is not private (CheckPrivate): a data directory holds the
// NATS token and every event in the audit store. An existing one is not
// changed (it may be a directory of the system's): open reports that
// others may list it, for a warning; the files reactord writes in it are
// 0600 whatever the directory. Its group's rights are the operator's to
// give, so a group of read-only tools can have the token (chmod g+rx
// DIR, g+r DIR/nats.token).
func EnsurePrivateDir(dir string) (open bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	if err := CheckPrivate(dir); err != nil {
		return false, err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return false, err
	}
	if !st.IsDir() {
		return false, fmt.Errorf("%s is not a directory", dir)
	}
	return st.Mode().Perm()&0o007 != 0, nil
}
