package sqlite

import (
	"fmt"
	"syscall"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite's unix VFS opens every file (a database, its journal) with a blocking open(2).
// On a named pipe that waits for a writer, for ever and beyond any context: a FIFO put
// at a store path between the tailer's check of the path and SQLite's open would wedge
// the tailer. So this package replaces, for every SQLite connection of the process, the
// VFS's "open" system call (sqlite3_vfs.xSetSystemCall, the interface SQLite offers for
// it) with openNonblocking, at package initialization, before any connection exists. A process that imports this
// package never blocks in SQLite's open(2).

// defaultOpen is the VFS's own open system call, which openNonblocking calls.
var defaultOpen uintptr

// openHook holds openNonblocking as a C function pointer holds a function in
// modernc.org/sqlite: a pointer to its (static) Go func value.
var openHook = openNonblocking

// openHookErr is why openNonblocking could not be installed (nil when it was): SQLite
// then opens as it always has, and only the tailer's check of the path remains. A
// Tailer's Run logs it.
var openHookErr = hookOpen()

// hookOpen installs openNonblocking as the default VFS's open system call.
func hookOpen() error {
	tls := libc.NewTLS()
	defer tls.Close()
	vfs := sqlite3.Xsqlite3_vfs_find(tls, 0)
	if vfs == 0 {
		return fmt.Errorf("no default VFS")
	}
	name, err := libc.CString("open")
	if err != nil {
		return err
	}
	defer libc.Xfree(tls, name)
	v := (*sqlite3.Tsqlite3_vfs)(cPointer(vfs))
	if v.FiVersion < 3 || v.FxSetSystemCall == 0 || v.FxGetSystemCall == 0 {
		return fmt.Errorf("VFS version %d cannot replace system calls", v.FiVersion)
	}
	get := *(*func(*libc.TLS, uintptr, uintptr) uintptr)(unsafe.Pointer(&v.FxGetSystemCall))
	set := *(*func(*libc.TLS, uintptr, uintptr, uintptr) int32)(unsafe.Pointer(&v.FxSetSystemCall))
	if defaultOpen = get(tls, vfs, name); defaultOpen == 0 {
		return fmt.Errorf("the VFS has no open system call")
	}
	if rc := set(tls, vfs, name, *(*uintptr)(unsafe.Pointer(&openHook))); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("xSetSystemCall(open): SQLite error %d", rc)
	}
	return nil
}

// openNonblocking opens like the VFS's open, with O_NONBLOCK, which returns at once on a
// named pipe; then it refuses a named pipe or a socket (ENXIO), and clears O_NONBLOCK on
// a regular file or a directory, which then behave exactly as before. A device keeps
// O_NONBLOCK, so that reading it cannot block either (/dev/urandom, which SQLite reads
// for randomness, never does).
func openNonblocking(tls *libc.TLS, path uintptr, flags, mode int32) int32 {
	open := *(*func(*libc.TLS, uintptr, int32, int32) int32)(unsafe.Pointer(&defaultOpen))
	fd := open(tls, path, flags|syscall.O_NONBLOCK, mode)
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
		*(*int32)(cPointer(libc.X__errno_location(tls))) = int32(syscall.ENXIO)
		return -1
	case syscall.S_IFREG, syscall.S_IFDIR:
		if flags&syscall.O_NONBLOCK == 0 {
			_ = syscall.SetNonblock(int(fd), false)
		}
	}
	return fd
}

// cPointer converts an address that SQLite's C code handles as an integer (memory of
// modernc.org/libc's allocator, or SQLite's static data: neither ever moves) to a pointer.
func cPointer(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
