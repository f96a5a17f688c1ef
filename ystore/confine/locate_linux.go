package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrMoved is wrapped by Locate's error when the file moved while it was being located;
// locating it again finds where it is now.
var ErrMoved = errors.New("file moved while being located")

// Located is a file found beneath a Dir: the directory holding it, open (so that it
// stays the directory found, whatever is renamed or linked later), and its name there.
type Located struct {
	Dir  *os.File    // the directory that holds the file, beneath the root
	Name string      // the file's name in Dir: never a symbolic link when located
	Info fs.FileInfo // the file as located: a regular file owned by the user
	UID  int         // the user's uid, which the file's journal, WAL and shared memory must have too
}

// Close closes the directory.
func (l *Located) Close() error { return l.Dir.Close() }

// Locate finds the regular file path names beneath the user's directory (symbolic
// links followed inside it) and checks on the open file that the user owns it (Owned);
// its directory is opened beneath the user's directory too. A file that is not regular
// is refused without being read (a named pipe is opened non-blocking).
func (d *Dir) Locate(path string) (*Located, error) {
	uid, err := d.OwnerUID()
	if err != nil {
		return nil, err
	}
	var l *Located
	err = d.in(path, func(r *os.Root, rel string) error {
		f, fi, err := openOwned(r, rel, path, uid)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		// Where the file is, as the kernel resolved it: its name in the directory that
		// holds it, which SQLite's journal, WAL and shared memory files sit beside.
		top, err := r.Open(".")
		if err != nil {
			return err
		}
		defer func() { _ = top.Close() }()
		rootAt, err := fdPath(top)
		if err != nil {
			return err
		}
		at, err := fdPath(f)
		if err != nil {
			return err
		}
		in, err := filepath.Rel(rootAt, at)
		if err != nil || in == ".." || strings.HasPrefix(in, "../") {
			return fmt.Errorf("%s: %w", path, ErrEscapes) // cannot be: the root resolved it
		}
		dir, err := r.OpenFile(filepath.Dir(in), os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return fmt.Errorf("%s: %w: %w", path, ErrMoved, err)
		}
		name := filepath.Base(in)
		if !sameAt(dir, name, fi) {
			_ = dir.Close()
			return fmt.Errorf("%s: %w", path, ErrMoved)
		}
		l = &Located{Dir: dir, Name: name, Info: fi, UID: uid}
		return nil
	})
	return l, err
}

// fdPath is where f is, as /proc/self/fd says.
func fdPath(f *os.File) (string, error) {
	var p string
	var err error
	c, cerr := f.SyscallConn()
	if cerr != nil {
		return "", cerr
	}
	if cerr = c.Control(func(fd uintptr) { p, err = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fd))) }); cerr != nil {
		return "", cerr
	}
	if err != nil {
		return "", fmt.Errorf("where the file is: %w", err)
	}
	return p, nil
}

// sameAt reports whether name in dir is fi's file itself, not a symbolic link to it.
func sameAt(dir *os.File, name string, fi fs.FileInfo) bool {
	want, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	var st unix.Stat_t
	var err error
	c, cerr := dir.SyscallConn()
	if cerr != nil {
		return false
	}
	if cerr = c.Control(func(fd uintptr) { err = unix.Fstatat(int(fd), name, &st, unix.AT_SYMLINK_NOFOLLOW) }); cerr != nil || err != nil {
		return false
	}
	return st.Dev == want.Dev && st.Ino == want.Ino && st.Mode&unix.S_IFMT == unix.S_IFREG
}
