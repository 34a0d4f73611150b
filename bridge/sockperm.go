package bridge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// dialFix is what the operator should do when the bridge cannot connect to
// the master's event socket at path. A socket the bridge may not open gets
// its mode and owner named: Salt creates master_event_pub.ipc 0600 (only
// the master's user), or 0660 (its group too) when the master has
// publisher_acl or external_auth set, and Salt 3007.8's IPC publisher
// always 0660.
func dialFix(path string, err error) string {
	if !errors.Is(err, fs.ErrPermission) {
		return "is the master running, and is --sock-dir its sock_dir?"
	}
	st, serr := os.Stat(path)
	if serr != nil {
		return "the bridge may not reach --sock-dir: run it as the master's user or root"
	}
	owner, group := ownerOf(st)
	if st.Mode().Perm()&0o060 == 0o060 {
		return fmt.Sprintf("the socket is mode %04o, owner %s, group %s: run the bridge as %s, as root, or as a member of group %s",
			st.Mode().Perm(), owner, group, owner, group)
	}
	return fmt.Sprintf("the socket is mode %04o, owner %s: run the bridge as %s or as root (Salt makes it 0660, open to group %s, when the master sets publisher_acl or external_auth)",
		st.Mode().Perm(), owner, owner, group)
}

// ownerOf names the owner and group of st, by name where the system knows
// them, else by number.
func ownerOf(st fs.FileInfo) (owner, group string) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return "?", "?"
	}
	owner, group = strconv.Itoa(int(sys.Uid)), strconv.Itoa(int(sys.Gid))
	if u, err := user.LookupId(owner); err == nil {
		owner = u.Username
	}
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	return owner, group
}
