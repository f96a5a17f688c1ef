package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// fileID is a file's device and inode.
type fileID struct{ dev, ino uint64 }

// openat2 is unix.Openat2; a test replaces it to walk by hand as on kernels without it.
var openat2 = unix.Openat2

// openBase opens the base a user's directory is walked from and checks that no user can
// write it: owned by root or the sidecar's uid, writable by neither group nor others.
func openBase(path string) (*os.File, error) {
	b, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("the base of the users' directories: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(b.Fd()), &st); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("the base of the users' directories: %w", err)
	}
	if (st.Uid != 0 && int(st.Uid) != os.Geteuid()) || st.Mode&0o022 != 0 {
		_ = b.Close()
		return nil, fmt.Errorf("%s (owner uid %d, mode %#o): %w", path, st.Uid, st.Mode&0o7777, ErrUnsafeBase)
	}
	if err := safeAncestors(int(b.Fd())); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// safeAncestors checks the directories above the base opened as fd, by its real path:
// a user who may rename entries in one of them (it is hers, or writable by users and
// not sticky) could move the base away and put her own in its place.
func safeAncestors(fd int) error {
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return fmt.Errorf("the base of the users' directories: %w", err)
	}
	for dir := filepath.Dir(real); ; dir = filepath.Dir(dir) {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			return fmt.Errorf("the base of the users' directories: %w", err)
		}
		if (st.Uid != 0 && int(st.Uid) != os.Geteuid()) || (st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0) {
			return fmt.Errorf("%s, above the base %s (owner uid %d, mode %#o): %w", dir, real, st.Uid, st.Mode&0o7777, ErrUnsafeBase)
		}
		if dir == "/" {
			return nil
		}
	}
}

// walk opens the directory rel names beneath base, no component a symbolic link (magic
// or not) or "..", and returns it with its device, inode and owner.
func walk(base *os.File, rel string) (*os.File, fileID, int, error) {
	fd, err := walkFD(int(base.Fd()), rel)
	if err != nil {
		return nil, fileID{}, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, fileID{}, 0, err
	}
	return os.NewFile(uintptr(fd), "user directory"), fileID{dev: st.Dev, ino: st.Ino}, int(st.Uid), nil
}

// dirFlags open a directory of the walk.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// walkFD is walk's descriptor: one openat2 call where the kernel has it (Linux 5.6),
// else the same walk by hand, as safe and a system call per component.
func walkFD(base int, rel string) (int, error) {
	how := unix.OpenHow{Flags: dirFlags, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	for range 8 { // EAGAIN: a rename raced the walk
		fd, err := openat2(base, rel, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
			// No openat2: an older kernel, or a seccomp filter that answers EPERM for a
			// system call it does not know (container runtimes before Docker 20.10).
			return walkByHand(base, rel)
		}
		return -1, walkErr(base, rel, err)
	}
	return -1, walkErr(base, rel, unix.EAGAIN)
}

// walkByHand opens rel beneath base one component at a time, each with O_NOFOLLOW; an
// absolute rel is refused and an empty one names nothing, as with openat2.
func walkByHand(base int, rel string) (int, error) {
	switch {
	case rel == "":
		return -1, unix.ENOENT
	case strings.HasPrefix(rel, "/"):
		return -1, walkErr(base, rel, unix.EXDEV)
	}
	fd, err := unix.Openat(base, ".", dirFlags, 0)
	if err != nil {
		return -1, err
	}
	for c := range strings.SplitSeq(rel, "/") {
		if c == "" || c == "." {
			continue
		}
		if c == ".." {
			_ = unix.Close(fd)
			return -1, walkErr(base, c, unix.EXDEV)
		}
		next, err := unix.Openat(fd, c, dirFlags, 0)
		if err != nil {
			err = walkErr(fd, c, err)
		}
		_ = unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// walkErr is the error of a walk that failed at rel in at: a symbolic link or ".." on
// the way is ErrEscapes; else the errno (ENOENT is fs.ErrNotExist). It names no path: the
// caller adds the user's directory's, which hub mode's logs redact.
func walkErr(at int, rel string, err error) error {
	var st unix.Stat_t
	link := errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) ||
		(errors.Is(err, unix.ENOTDIR) && unix.Fstatat(at, rel, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK)
	if link {
		return fmt.Errorf("a symbolic link or .. on the way: %w", ErrEscapes)
	}
	return err
}

// rootOf is f, an open directory, as an os.Root: opened again through /proc/self/fd,
// which leads to the open directory itself whatever its path is now, and checked to be it.
func rootOf(f *os.File) (*os.Root, error) {
	r, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return nil, err
	}
	top, err := r.Open(".")
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	defer func() { _ = top.Close() }()
	a, aerr := f.Stat()
	b, berr := top.Stat()
	if aerr != nil || berr != nil || !os.SameFile(a, b) {
		_ = r.Close()
		return nil, fmt.Errorf("reopening the user's directory: %w", errors.Join(aerr, berr, ErrSwapped))
	}
	return r, nil
}
