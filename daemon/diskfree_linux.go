package daemon

import "syscall"

// diskFree returns the bytes an unprivileged writer has free on dir's
// file system.
func diskFree(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}
