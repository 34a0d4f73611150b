package bridge

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestDialFix(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Skipf("no current user: %v", err)
	}
	dir := t.TempDir()
	denied := &os.SyscallError{Syscall: "connect", Err: syscall.EACCES}
	cases := []struct {
		name string
		mode fs.FileMode
		err  error
		want []string
	}{
		{"0600: the master's user or root", 0o600, denied, []string{"mode 0600", "owner " + me.Username, "publisher_acl or external_auth"}},
		{"0660: its group too", 0o660, denied, []string{"mode 0660", "a member of group"}},
		{"not there: the master or sock_dir", 0o600, fmt.Errorf("dial: %w", syscall.ENOENT), []string{"is the master running"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strconv.Itoa(i))
			if err := os.WriteFile(path, nil, tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			got := dialFix(path, tc.err)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("dialFix = %q, want it to contain %q", got, w)
				}
			}
		})
	}
}
