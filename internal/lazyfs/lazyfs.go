// Package lazyfs is a FUSE file system for power-loss tests, after
// Jepsen's LazyFS: a loopback over a backing directory that keeps the
// data written to a file in memory (its page cache) until the file is
// synced, and drops whatever was not synced on a simulated power loss.
//
// # The model
//
// The backing directory stands for the disk: what reached it survives a
// power loss (the machine running the test never loses power, so the
// backing file system's own cache is not modelled). Between the programs
// under test and that disk sits the page cache lazyfs keeps per file
// (per backing inode, shared by every open handle and hard link):
//
//   - write and truncate (ftruncate, truncate, open with O_TRUNC) change
//     the page cache only. Reads, stat sizes and mmap see them, as on a
//     real kernel.
//   - fsync and fdatasync (either, on any handle of the file) write the
//     file's cached pages and size to the disk. Closing a file does not.
//   - Directory operations (create, mkdir, unlink, rename, link, symlink,
//     chmod) go to the disk at once: they are durable without an fsync of
//     the directory.
//   - PowerLoss drops every cached page: each file is left as it was at
//     its last fsync (a file created and never synced is left empty; a
//     file renamed over another before its data was synced is left with
//     its synced content, possibly empty, under the new name).
//
// This is LazyFS's own model (it caches data, not metadata: "LazyFS does
// not currently simulate the loss of metadata operations"). It is kinder
// than a real file system in one way only: a created, renamed or deleted
// name survives without the fsync of its directory. A program that
// acknowledges data after fsync of the file but without fsync of a new
// file's directory can lose that file on ext4 and keep it here. It is
// still a fair test of what the tests here ask (is acknowledged data
// fsynced before the acknowledgement?), and it is harsher than ext4's
// data=ordered default, which writes a file's data before the metadata
// that points at it: here no unsynced byte survives.
//
// Not modelled: O_TMPFILE and fallocate are refused, copy_file_range and
// statx are left to the kernel's fallbacks (reads and writes, getattr), so
// nothing bypasses the cache; file locks are the kernel's (local to the
// machine, as the programs under test are). Writes through a shared mmap
// reach the cache when the kernel writes the pages back. Two processes
// sharing SQLite's mapped WAL index on the mount once showed the reader a
// malformed database (the writer and the disk were sound); the tests read
// a database on the mount only while no other process uses it.
package lazyfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// pageSize is the unit of the page cache.
const pageSize = 4096

// Available reports why FUSE mounts cannot be made here (nil: they can):
// mounting needs root (lazyfs mounts with mount(2) itself), /dev/fuse, and
// a kernel that lets this process mount (a container may not): the first
// call makes a trial mount.
func Available() error {
	availableOnce.Do(func() { availableErr = available() })
	return availableErr
}

var (
	availableOnce sync.Once
	availableErr  error
)

func available() error {
	if os.Geteuid() != 0 {
		return errors.New("lazyfs mounts with mount(2), which needs root; this test runs as uid " + fmt.Sprint(os.Geteuid()))
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no FUSE device: %w", err)
	}
	tmp, err := os.MkdirTemp("", "lazyfs-trial")
	if err != nil {
		return fmt.Errorf("trial mount: %w", err)
	}
	defer os.RemoveAll(tmp)
	backing, dir := filepath.Join(tmp, "backing"), filepath.Join(tmp, "mnt")
	for _, d := range []string{backing, dir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("trial mount: %w", err)
		}
	}
	f, err := Mount(backing, dir)
	if err != nil {
		return fmt.Errorf("trial mount: %w", err)
	}
	return f.Unmount()
}

// FS is a mounted lazyfs: Dir is where the programs under test work,
// Backing the disk underneath.
type FS struct {
	// Dir is the mount point.
	Dir string
	// Backing is the directory holding what survives a power loss.
	Backing string

	mu     sync.Mutex
	server *fuse.Server
	files  map[uint64]*file // by backing inode: open or with unsynced data
	dead   bool             // between a power loss and the next mount
	losses int
	lost   int64
}

// file is the state of one backing inode.
type file struct {
	mu    sync.Mutex
	opens int
	cache *cache // nil: clean, reads and writes go to the disk's content
}

// cache is a file's unsynced state: its size and dirty pages over the
// content on disk.
type cache struct {
	fd    int   // a backing descriptor of the file (our own dup), to fill pages and sync
	size  int64 // the file's size as programs see it
	limit int64 // bytes of the disk's content still visible (after a truncation, the rest reads as zeros)
	pages map[int64][]byte
}

// Mount mounts a lazyfs of backing on dir (both must exist).
func Mount(backing, dir string) (*FS, error) {
	f := &FS{Dir: dir, Backing: backing, files: map[uint64]*file{}}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FS) mount() error {
	var st syscall.Stat_t
	if err := syscall.Stat(f.Backing, &st); err != nil {
		return fmt.Errorf("lazyfs backing %s: %w", f.Backing, err)
	}
	root := &fs.LoopbackRoot{Path: f.Backing, Dev: st.Dev}
	rn := &node{LoopbackNode: &fs.LoopbackNode{RootData: root}, fs: f}
	root.RootNode = rn
	server, err := fs.Mount(f.Dir, rn, &fs.Options{MountOptions: fuse.MountOptions{
		FsName: "lazyfs:" + f.Backing, Name: "lazyfs", DirectMount: true, DirectMountStrict: true,
		// Other users (a daemon that drops privileges) may use it too.
		AllowOther: true,
	}})
	if err != nil {
		return fmt.Errorf("lazyfs mount on %s: %w", f.Dir, err)
	}
	f.mu.Lock()
	f.server, f.dead = server, false
	f.files = map[uint64]*file{}
	f.mu.Unlock()
	return nil
}

// PowerLoss simulates a power failure: every byte not synced is dropped,
// the file system is unmounted (lazily, should a process still hold it:
// kill the programs under test first) and mounted again over what the
// disk kept, for the restart.
func (f *FS) PowerLoss() error {
	f.drop()
	if err := f.unmount(); err != nil {
		return err
	}
	return f.mount()
}

// drop throws the page cache away; until the next mount every operation
// on a file fails (the kernel flushing mmap'd pages at the unmount must
// not land).
func (f *FS) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead = true
	f.losses++
	for _, fl := range f.files {
		fl.mu.Lock()
		if c := fl.cache; c != nil {
			for _, p := range c.pages {
				f.lost += int64(len(p))
			}
			unix.Close(c.fd)
			fl.cache = nil
		}
		fl.mu.Unlock()
	}
	f.files = map[uint64]*file{}
}

// LostBytes is the number of bytes (whole cached pages) dropped by the
// power losses so far.
func (f *FS) LostBytes() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost
}

// Unsynced is the number of bytes of dirty pages held now.
func (f *FS) Unsynced() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, fl := range f.files {
		fl.mu.Lock()
		if fl.cache != nil {
			n += int64(len(fl.cache.pages)) * pageSize
		}
		fl.mu.Unlock()
	}
	return n
}

// MountTemp mounts a file system over a new backing directory at a new
// mount point, both under tb's temporary directories, and unmounts it
// when tb ends (lazily if need be); a mount that fails fails tb.
func MountTemp(tb testing.TB) *FS {
	tb.Helper()
	f, err := Mount(tb.TempDir(), tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			tb.Error(err)
		}
	})
	return f
}

// Unmount unmounts the file system, keeping unsynced data (a clean
// shutdown: it is written to the disk first). It falls back to a lazy
// unmount when the mount is busy, so a test never leaves it behind.
func (f *FS) Unmount() error {
	f.mu.Lock()
	var errs []error
	for _, fl := range f.files {
		fl.mu.Lock()
		if fl.cache != nil {
			errs = append(errs, fl.cache.sync())
			unix.Close(fl.cache.fd)
			fl.cache = nil
		}
		fl.mu.Unlock()
	}
	f.dead = true
	f.mu.Unlock()
	errs = append(errs, f.unmount())
	return errors.Join(errs...)
}

func (f *FS) unmount() error {
	f.mu.Lock()
	server := f.server
	f.server = nil
	f.mu.Unlock()
	if server == nil {
		return nil
	}
	if err := syscall.Unmount(f.Dir, 0); err != nil {
		if err := syscall.Unmount(f.Dir, unix.MNT_DETACH); err != nil {
			// Last resort: fusermount knows mounts it did not make too.
			if out, ferr := exec.Command("fusermount3", "-uz", f.Dir).CombinedOutput(); ferr != nil {
				return fmt.Errorf("lazyfs unmount %s: %w (fusermount3: %v: %s)", f.Dir, err, ferr, out)
			}
		}
	}
	server.Wait()
	return nil
}

// fileOf returns (making it) the state of the backing inode of fd and
// counts one more open.
func (f *FS) open(fd int) (*file, uint64, syscall.Errno) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return nil, 0, syscall.EIO
	}
	fl := f.files[st.Ino]
	if fl == nil {
		fl = &file{}
		f.files[st.Ino] = fl
	}
	fl.mu.Lock()
	fl.opens++
	fl.mu.Unlock()
	return fl, st.Ino, 0
}

// lookup returns the state of a backing inode, nil when it has none.
func (f *FS) lookup(ino uint64) *file {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.files[ino]
}

// forget drops the state of ino once it is closed everywhere and its last
// name is gone (its unsynced data goes with it, as a deleted file's does).
func (f *FS) forget(ino uint64, nlink uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.files[ino]
	if fl == nil {
		return
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.opens > 0 {
		return
	}
	if fl.cache == nil || nlink == 0 {
		if fl.cache != nil {
			unix.Close(fl.cache.fd)
			fl.cache = nil
		}
		delete(f.files, ino)
	}
}

func (f *FS) isDead() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dead
}

// ensure returns fl's cache, made over fd's content when clean.
func (fl *file) ensure(fd int) (*cache, error) {
	if fl.cache != nil {
		return fl.cache, nil
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat: %w", err)
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("dup: %w", err)
	}
	fl.cache = &cache{fd: dup, size: st.Size, limit: st.Size, pages: map[int64][]byte{}}
	return fl.cache, nil
}

// fill reads page i as programs see it into p (pageSize bytes).
func (c *cache) fill(i int64, p []byte) error {
	if d := c.pages[i]; d != nil {
		copy(p, d)
		return nil
	}
	clear(p)
	start := i * pageSize
	if start >= c.limit {
		return nil
	}
	return preadFull(c.fd, p[:min(pageSize, c.limit-start)], start)
}

// preadFull reads len(p) bytes at off, leaving zeros past the end of the
// file.
func preadFull(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pread(fd, p, off)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("pread at %d: %w", off, err)
		}
		if n == 0 {
			clear(p)
			return nil
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

func (c *cache) read(buf []byte, off int64) (int, error) {
	if off >= c.size {
		return 0, nil
	}
	n := int(min(int64(len(buf)), c.size-off))
	page := make([]byte, pageSize)
	for done := 0; done < n; {
		pos := off + int64(done)
		i := pos / pageSize
		if err := c.fill(i, page); err != nil {
			return 0, err
		}
		done += copy(buf[done:n], page[pos-i*pageSize:])
	}
	return n, nil
}

func (c *cache) write(data []byte, off int64) error {
	for done := 0; done < len(data); {
		pos := off + int64(done)
		i := pos / pageSize
		p := c.pages[i]
		if p == nil {
			p = make([]byte, pageSize)
			if err := c.fill(i, p); err != nil {
				return err
			}
			c.pages[i] = p
		}
		done += copy(p[pos-i*pageSize:], data[done:])
	}
	c.size = max(c.size, off+int64(len(data)))
	return nil
}

func (c *cache) truncate(size int64) {
	if size < c.size {
		for i, p := range c.pages {
			switch start := i * pageSize; {
			case start >= size:
				delete(c.pages, i)
			case start+pageSize > size:
				clear(p[size-start:])
			}
		}
		c.limit = min(c.limit, size)
	}
	c.size = size
}

// sync writes the cache to the disk: the file then has exactly the
// content programs see.
func (c *cache) sync() error {
	var st syscall.Stat_t
	if err := syscall.Fstat(c.fd, &st); err != nil {
		return fmt.Errorf("fstat: %w", err)
	}
	if c.limit < st.Size {
		if err := syscall.Ftruncate(c.fd, c.limit); err != nil {
			return fmt.Errorf("ftruncate: %w", err)
		}
	}
	for i, p := range c.pages {
		start := i * pageSize
		end := min(start+pageSize, c.size)
		if start >= end {
			continue
		}
		if _, err := unix.Pwrite(c.fd, p[:end-start], start); err != nil {
			return fmt.Errorf("pwrite at %d: %w", start, err)
		}
	}
	if err := syscall.Ftruncate(c.fd, c.size); err != nil {
		return fmt.Errorf("ftruncate: %w", err)
	}
	return nil
}

// node is a loopback node whose files go through the page cache.
type node struct {
	*fs.LoopbackNode
	fs *FS
}

var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeStatxer        = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
)

// WrapChild makes every node of the tree a lazyfs node.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

func (n *node) path() string { return filepath.Join(n.RootData.Path, n.Path(nil)) }

// backingFlags opens the disk's file readable (pages are filled from it)
// and never truncates it (truncation is cached) nor appends (the kernel
// gives the offsets).
func backingFlags(flags uint32) uint32 {
	flags &^= syscall.O_TRUNC | syscall.O_APPEND | fuse.FMODE_EXEC
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		flags = flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	return flags
}

// handle wraps a loopback file (which owns the descriptor).
func (n *node) handle(lf fs.FileHandle, flags uint32) (fs.FileHandle, syscall.Errno) {
	l := lf.(*fs.LoopbackFile)
	fd, ok := l.PassthroughFd()
	if !ok {
		l.Release(context.Background())
		return nil, syscall.EBADF
	}
	fl, ino, errno := n.fs.open(fd)
	if errno != 0 {
		l.Release(context.Background())
		return nil, errno
	}
	h := &handle{lf: l, fd: fd, file: fl, ino: ino, fs: n.fs}
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		fl.mu.Lock()
		c, err := fl.ensure(fd)
		if err == nil {
			c.truncate(0)
		}
		fl.mu.Unlock()
		if err != nil {
			h.Release(context.Background())
			return nil, fs.ToErrno(err)
		}
	}
	return h, 0
}

// Open opens the disk's file; O_TRUNC truncates the cache only.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	lf, _, errno := n.LoopbackNode.Open(ctx, backingFlags(flags))
	if errno != 0 {
		return nil, 0, errno
	}
	h, errno := n.handle(lf, flags)
	return h, 0, errno
}

// Create creates the file on the disk at once (a metadata operation).
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, lf, _, errno := n.LoopbackNode.Create(ctx, name, backingFlags(flags), mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, errno := n.handle(lf, flags)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	fl := h.(*handle).file
	fl.mu.Lock()
	if fl.cache != nil {
		out.Size = uint64(fl.cache.size)
	}
	fl.mu.Unlock()
	return in, h, 0, 0
}

// cached overlays a file's cached size on attributes read from the disk.
func (n *node) cached(ino uint64, out *fuse.Attr) {
	fl := n.fs.lookup(ino)
	if fl == nil {
		return
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.cache != nil {
		out.Size = uint64(fl.cache.size)
		out.Blocks = (out.Size + 511) / 512
	}
}

// Getattr stats the disk's file (through the handle when given: the name
// may be gone) with the cached size.
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		var st syscall.Stat_t
		if err := syscall.Fstat(h.fd, &st); err != nil {
			return fs.ToErrno(err)
		}
		out.FromStat(&st)
	} else if errno := n.LoopbackNode.Getattr(ctx, nil, out); errno != 0 {
		return errno
	}
	n.cached(n.backingIno(f, out), &out.Attr)
	return 0
}

// backingIno is the disk's inode number of the node (FUSE's may mix in
// the device).
func (n *node) backingIno(f fs.FileHandle, out *fuse.AttrOut) uint64 {
	if h, ok := f.(*handle); ok {
		return h.ino
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(n.path(), &st); err != nil {
		return out.Ino
	}
	return st.Ino
}

// Setattr truncates in the cache; the other changes are metadata, made
// on the disk.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		if n.fs.isDead() {
			return syscall.EIO
		}
		h, _ := f.(*handle)
		if h == nil {
			fh, _, errno := n.Open(ctx, syscall.O_RDWR)
			if errno != 0 {
				return errno
			}
			h = fh.(*handle)
			defer h.Release(ctx)
		}
		h.file.mu.Lock()
		c, err := h.file.ensure(h.fd)
		if err == nil {
			c.truncate(int64(sz))
		}
		h.file.mu.Unlock()
		if err != nil {
			return fs.ToErrno(err)
		}
		in.Valid &^= fuse.FATTR_SIZE
	}
	var lf fs.FileHandle
	if h, ok := f.(*handle); ok {
		lf = h.lf
	}
	if errno := n.LoopbackNode.Setattr(ctx, lf, in, out); errno != 0 {
		return errno
	}
	return n.Getattr(ctx, f, out)
}

// Statx is left to Getattr (the kernel falls back to it).
func (n *node) Statx(context.Context, fs.FileHandle, uint32, uint32, *fuse.StatxOut) syscall.Errno {
	return syscall.ENOSYS
}

// Tmpfile refuses O_TMPFILE (the loopback's file would bypass the cache).
func (n *node) Tmpfile(context.Context, uint32, uint32, *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

// CopyFileRange is left to reads and writes (the kernel falls back).
func (n *node) CopyFileRange(context.Context, fs.FileHandle, uint64, *fs.Inode, fs.FileHandle, uint64, uint64, uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// Unlink removes the name on the disk; the last name of a closed file
// takes its cache with it.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	var st syscall.Stat_t
	statErr := syscall.Lstat(filepath.Join(n.path(), name), &st)
	if errno := n.LoopbackNode.Unlink(ctx, name); errno != 0 {
		return errno
	}
	if statErr == nil {
		n.fs.forget(st.Ino, st.Nlink-1)
	}
	return 0
}

// Rename renames on the disk; a file replaced loses its cache as Unlink.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	var st syscall.Stat_t
	statErr := syscall.Lstat(filepath.Join(np.path(), newName), &st)
	if errno := n.LoopbackNode.Rename(ctx, name, np.LoopbackNode, newName, flags); errno != 0 {
		return errno
	}
	if statErr == nil && flags&unix.RENAME_EXCHANGE == 0 {
		n.fs.forget(st.Ino, st.Nlink-1)
	}
	return 0
}

// handle is an open file: reads and writes go through its inode's cache.
type handle struct {
	lf   *fs.LoopbackFile
	fd   int
	ino  uint64
	file *file
	fs   *FS
}

var (
	_ fs.FileReader   = (*handle)(nil)
	_ fs.FileWriter   = (*handle)(nil)
	_ fs.FileFsyncer  = (*handle)(nil)
	_ fs.FileFlusher  = (*handle)(nil)
	_ fs.FileReleaser = (*handle)(nil)
	_ fs.FileGetlker  = (*handle)(nil)
	_ fs.FileSetlker  = (*handle)(nil)
	_ fs.FileSetlkwer = (*handle)(nil)
)

func (h *handle) Read(_ context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.fs.isDead() {
		return nil, syscall.EIO
	}
	h.file.mu.Lock()
	defer h.file.mu.Unlock()
	if c := h.file.cache; c != nil {
		n, err := c.read(buf, off)
		if err != nil {
			return nil, fs.ToErrno(err)
		}
		return fuse.ReadResultData(buf[:n]), 0
	}
	n, err := unix.Pread(h.fd, buf, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(buf[:n]), 0
}

func (h *handle) Write(_ context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.fs.isDead() {
		return 0, syscall.EIO
	}
	h.file.mu.Lock()
	defer h.file.mu.Unlock()
	c, err := h.file.ensure(h.fd)
	if err == nil {
		err = c.write(data, off)
	}
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	return uint32(len(data)), 0
}

// Fsync writes the file's cache to the disk (fsync and fdatasync alike).
func (h *handle) Fsync(context.Context, uint32) syscall.Errno {
	if h.fs.isDead() {
		return syscall.EIO
	}
	h.file.mu.Lock()
	defer h.file.mu.Unlock()
	c := h.file.cache
	if c == nil {
		return 0
	}
	if err := c.sync(); err != nil {
		return fs.ToErrno(err)
	}
	unix.Close(c.fd)
	h.file.cache = nil
	return 0
}

// Flush (at each close) syncs nothing.
func (h *handle) Flush(context.Context) syscall.Errno { return 0 }

func (h *handle) Release(ctx context.Context) syscall.Errno {
	var st syscall.Stat_t
	nlink := uint64(1)
	if syscall.Fstat(h.fd, &st) == nil {
		nlink = st.Nlink
	}
	h.file.mu.Lock()
	h.file.opens--
	h.file.mu.Unlock()
	h.fs.forget(h.ino, nlink)
	return h.lf.Release(ctx)
}

func (h *handle) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return h.lf.Getlk(ctx, owner, lk, flags, out)
}

func (h *handle) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.lf.Setlk(ctx, owner, lk, flags)
}

func (h *handle) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.lf.Setlkw(ctx, owner, lk, flags)
}
