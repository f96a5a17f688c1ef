package sqlitevfs

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/confine"
)

// SQLite's unix VFS opens every file (a database, its journal) with a blocking open(2).
// On a named pipe that waits for a writer, for ever and beyond any context: a FIFO put
// at a store path between a check of the path and SQLite's open would wedge the reader.
// So this package replaces, for every SQLite connection of the process, the VFS's
// "open" system call (sqlite3_vfs.xSetSystemCall, the interface SQLite offers for it)
// with openHooked, at package initialization, before any connection exists. A process
// that imports this package never blocks in SQLite's open(2).
//
// Confinement (hub mode) replaces "access" and "stat" as well: SQLite asks them whether
// a database's journal or WAL exists. A confined database is handed to SQLite under a
// name of Confine's; the three calls resolve it in the directory confine.Locate opened
// beneath the user's directory (openat, fstatat, never following a symbolic link), so
// no rename or link the user makes afterwards can point SQLite anywhere else; every file
// opened is checked on its descriptor to be a regular file of the user's (a hard link
// to another user's WAL keeps that user's uid), and the database file itself must still
// be the one located (device and inode).

// The VFS's own system calls, which the hooks call for every other name.
var defaultOpen, defaultAccess, defaultStat uintptr

// The hooks as C function pointers hold functions in modernc.org/sqlite: pointers to
// their (static) Go func values.
var (
	openHook   = openHooked
	accessHook = accessHooked
	statHook   = statHooked
)

// HookErr is why the system calls could not be replaced (nil when they were): SQLite
// then opens as it always has, only the callers' checks of a path remain, and Confine
// refuses. The store tailer logs it.
var HookErr = hookSyscalls()

// hookSyscalls installs the hooks as the default VFS's system calls.
func hookSyscalls() error {
	tls := libc.NewTLS()
	defer tls.Close()
	vfs := sqlite3.Xsqlite3_vfs_find(tls, 0)
	if vfs == 0 {
		return fmt.Errorf("no default VFS")
	}
	v := (*sqlite3.Tsqlite3_vfs)(cPointer(vfs))
	if v.FiVersion < 3 || v.FxSetSystemCall == 0 || v.FxGetSystemCall == 0 {
		return fmt.Errorf("VFS version %d cannot replace system calls", v.FiVersion)
	}
	get := *(*func(*libc.TLS, uintptr, uintptr) uintptr)(unsafe.Pointer(&v.FxGetSystemCall))
	set := *(*func(*libc.TLS, uintptr, uintptr, uintptr) int32)(unsafe.Pointer(&v.FxSetSystemCall))
	for _, h := range []struct {
		name string
		dflt *uintptr
		hook unsafe.Pointer
	}{
		{"open", &defaultOpen, unsafe.Pointer(&openHook)},
		{"access", &defaultAccess, unsafe.Pointer(&accessHook)},
		{"stat", &defaultStat, unsafe.Pointer(&statHook)},
	} {
		name, err := libc.CString(h.name)
		if err != nil {
			return err
		}
		*h.dflt = get(tls, vfs, name)
		rc := sqlite3.SQLITE_ERROR
		if *h.dflt != 0 {
			rc = int(set(tls, vfs, name, *(*uintptr)(h.hook)))
		}
		libc.Xfree(tls, name)
		if *h.dflt == 0 {
			return fmt.Errorf("the VFS has no %s system call", h.name)
		}
		if rc != sqlite3.SQLITE_OK {
			return fmt.Errorf("xSetSystemCall(%s): SQLite error %d", h.name, rc)
		}
	}
	return nil
}

// Confined is a database SQLite opens only where it was located.
type Confined struct {
	id   uint64
	dir  int // the located directory
	base string
	dev  uint64
	ino  uint64
	uid  int // the user's: every file opened must be theirs
	l    *confine.Located
}

// Confine registers the located database l and returns it; SQLite opens it by its Name.
// It owns l: Close closes it.
func Confine(l *confine.Located) (*Confined, error) {
	if HookErr != nil {
		return nil, fmt.Errorf("confining SQLite: %w", HookErr)
	}
	st, ok := l.Info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("confining SQLite: no device and inode")
	}
	c := &Confined{id: nextID.Add(1), dir: int(l.Dir.Fd()), base: l.Name, dev: st.Dev, ino: st.Ino, uid: l.UID, l: l}
	registry.Lock()
	registry.m[c.id] = c
	registry.Unlock()
	return c, nil
}

// Name is the name to open the database by (in a file: URI).
func (c *Confined) Name() string { return prefix + strconv.FormatUint(c.id, 10) + "/" + c.base }

// Close forgets the database and closes its directory; the connections opened by Name
// must be closed before.
func (c *Confined) Close() error {
	registry.Lock()
	delete(registry.m, c.id)
	registry.Unlock()
	return c.l.Close()
}

// isConfined reports, without copying it, whether the C string at path starts with
// prefix: the hooks run for every file of every connection.
func isConfined(path uintptr) bool {
	for i := range len(prefix) {
		if *(*byte)(cPointer(path + uintptr(i))) != prefix[i] {
			return false
		}
	}
	return true
}

// confined runs fn with the confined database and file name path names, registry
// read-locked; it returns -1 with errno ENOENT for a name that names none.
func confined(tls *libc.TLS, path uintptr, fn func(c *Confined, file string) int32) int32 {
	registry.RLock()
	defer registry.RUnlock()
	c, file := lookup(libc.GoString(path))
	if c == nil {
		return fail(tls, syscall.ENOENT)
	}
	return fn(c, file)
}

// fail sets errno and returns -1, as a failed system call does.
func fail(tls *libc.TLS, errno syscall.Errno) int32 {
	*(*int32)(cPointer(libc.X__errno_location(tls))) = int32(errno)
	return -1
}

// openHooked opens like the VFS's open, with O_NONBLOCK, which returns at once on a
// named pipe; then it refuses a named pipe or a socket (ENXIO), and clears O_NONBLOCK on
// a regular file or a directory, which then behave exactly as before. A device keeps
// O_NONBLOCK, so that reading it cannot block either (/dev/urandom, which SQLite reads
// for randomness, never does). A confined name is opened in its directory, never
// through a symbolic link, and checked on the open descriptor (openConfined).
func openHooked(tls *libc.TLS, path uintptr, flags, mode int32) int32 {
	if !isConfined(path) {
		open := *(*func(*libc.TLS, uintptr, int32, int32) int32)(unsafe.Pointer(&defaultOpen))
		return settle(tls, open(tls, path, flags|syscall.O_NONBLOCK, mode), flags)
	}
	return confined(tls, path, func(c *Confined, file string) int32 {
		fd, err := c.open(file, int(flags), uint32(mode))
		if err != nil {
			return fail(tls, err.(syscall.Errno))
		}
		return settle(tls, int32(fd), flags)
	})
}

// open opens file in the located directory, never through a symbolic link, non-blocking,
// and checks the open descriptor (fstat, never the name): a regular file owned by the
// user (confine.CheckOwner: a hard link to another user's file keeps that user's uid),
// and for the database the very file located (device and inode); else EACCES. A
// journal, WAL or shared-memory file SQLite asks to create (run as root, it then gives
// it the database's owner) is created only if missing (O_EXCL): one this call created
// is the sidecar's own, new and empty.
func (c *Confined) open(file string, flags int, mode uint32) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	fd, err := unix.Openat(c.dir, file, flags&^unix.O_CREAT, mode)
	created := false
	if errors.Is(err, unix.ENOENT) && flags&unix.O_CREAT != 0 && file != c.base {
		fd, err = unix.Openat(c.dir, file, flags|unix.O_EXCL, mode)
		created = err == nil
	}
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, unix.EACCES
	}
	regular := st.Mode&unix.S_IFMT == unix.S_IFREG
	switch {
	case !regular:
	case file == c.base && (st.Dev != c.dev || st.Ino != c.ino):
	case created:
		return fd, nil
	case confine.CheckOwner(file, int(st.Uid), uint64(st.Nlink), true, c.uid) == nil:
		return fd, nil
	}
	_ = unix.Close(fd)
	return -1, unix.EACCES
}

// settle refuses, closing it, an fd opened on a named pipe or a socket (ENXIO); it
// clears O_NONBLOCK on a regular file or a directory unless flags asked for it.
func settle(tls *libc.TLS, fd, flags int32) int32 {
	if fd < 0 {
		return fd
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd), &st); err != nil {
		return fd // as the default open would have
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFSOCK:
		_ = syscall.Close(int(fd))
		return fail(tls, syscall.ENXIO)
	case syscall.S_IFREG, syscall.S_IFDIR:
		if flags&syscall.O_NONBLOCK == 0 {
			_ = syscall.SetNonblock(int(fd), false)
		}
	}
	return fd
}

// accessHooked is the VFS's access; a confined name is looked up in its directory, a
// symbolic link there being no file.
func accessHooked(tls *libc.TLS, path uintptr, mode int32) int32 {
	if !isConfined(path) {
		return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&defaultAccess)))(tls, path, mode)
	}
	return confined(tls, path, func(c *Confined, file string) int32 {
		var st unix.Stat_t
		if err := unix.Fstatat(c.dir, file, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fail(tls, err.(syscall.Errno))
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return fail(tls, syscall.ENOENT)
		}
		if mode != unix.F_OK {
			if err := unix.Faccessat(c.dir, file, uint32(mode), 0); err != nil {
				return fail(tls, err.(syscall.Errno))
			}
		}
		return 0
	})
}

// statHooked is the VFS's stat; a confined name is looked up in its directory, not
// following a symbolic link.
func statHooked(tls *libc.TLS, path, buf uintptr) int32 {
	if !isConfined(path) {
		return (*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&defaultStat)))(tls, path, buf)
	}
	return confined(tls, path, func(c *Confined, file string) int32 {
		name, err := libc.CString(file)
		if err != nil {
			return fail(tls, syscall.ENOMEM)
		}
		defer libc.Xfree(tls, name)
		return libc.Xfstatat(tls, int32(c.dir), name, buf, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// cPointer converts an address that SQLite's C code handles as an integer (memory of
// modernc.org/libc's allocator, or SQLite's static data: neither ever moves) to a pointer.
func cPointer(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
