// Package confine opens what the sidecar reads for one hub-mode user beneath that user's
// directory. The hub-mode sidecar may read every home (the systemd unit gives it
// CAP_DAC_READ_SEARCH), so a path a user controls (a symbolic link in their home, their
// store replaced by a link, their directory replaced by a link, a hard link to another
// user's file) must not lead it to another user's files.
//
// A Dir is the user's directory beneath a base the user cannot write (the part of a
// hub template above {username}, /home for /home/{username}/work: owned by root or the
// sidecar's uid, writable by neither group nor others). At its first use it is opened
// from the base one component at a time, no symbolic link, magic link or ".." in any
// (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, or the same
// walk by hand where the kernel has no openat2), and kept open: pinned by device and
// inode. Every later use walks the path again and refuses (ErrSwapped) when it leads to
// another directory, so a directory renamed or replaced by a link after the user's
// tenant started leads nowhere else. Paths beneath the directory are resolved by os.Root
// on the open directory (symbolic links followed only while they stay inside it), and
// every file opened for the user is checked on the open descriptor: a regular file
// owned by the user, the owner of the pinned directory of the Dir's Owner (a hard link
// keeps its owner: one to another user's file is refused).
package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ErrRefused is wrapped by every error of a path the confinement refuses.
var ErrRefused = errors.New("refused")

// ErrEscapes is wrapped by the error of a path that leads outside the user's directory
// (through a symbolic link, or "..").
var ErrEscapes = fmt.Errorf("%w: leads outside the user's directory", ErrRefused)

// ErrNotOwned is wrapped by the error of a file not owned by the user.
var ErrNotOwned = fmt.Errorf("%w: not owned by the user", ErrRefused)

// ErrSwapped is wrapped by the error of every use of a Dir whose path, since the Dir was
// pinned, leads to another directory (or to none: renamed, replaced by a link).
var ErrSwapped = fmt.Errorf("%w: the user's directory was replaced after it was opened", ErrRefused)

// ErrUnsafeBase is wrapped by the error of a Dir whose base users may write: its path
// could then be swapped beneath the walk.
var ErrUnsafeBase = fmt.Errorf("%w: the directory above the user's is writable by users", ErrRefused)

// Config is where a Dir is.
type Config struct {
	// Base is the directory the user's directory is opened from: owned by root or the
	// sidecar's uid and writable by neither group nor others, else every use is refused
	// (ErrUnsafeBase). It is opened by its path, as the operator configured it.
	Base string
	// Root is the user's directory: Base itself or a path beneath it, lexically.
	Root string
	// Owner is the Dir whose pinned directory's owner is the user; nil: this Dir's own.
	Owner *Dir
	// OnSwap hears, once each time, that the path of the pinned directory was found to
	// lead elsewhere; nil: nobody. It must not name the user (the caller's logger does
	// that redacting).
	OnSwap func(err error)
}

// Dir is one user's directory, opened at its first use and kept open (Close).
type Dir struct {
	cfg Config

	mu      sync.Mutex
	base    *os.File // the base, opened and checked at the first use
	root    *os.Root // the pinned directory; nil until its first use finds it
	id      fileID   // the pinned directory's device and inode
	uid     int      // its owner
	swapped bool     // the last check found the path leading elsewhere
}

// New returns the Dir cfg describes; it does no I/O.
func New(cfg Config) *Dir { return &Dir{cfg: cfg} }

// Close closes the directory and its base; every later use fails.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var err error
	if d.root != nil {
		err = d.root.Close()
	}
	if d.base != nil {
		err = errors.Join(err, d.base.Close())
	}
	d.root, d.base = nil, nil
	d.cfg.Root = "" // every later use fails to walk
	return err
}

// rel is path relative to the user's directory; path is absolute (or relative to the
// working directory) and names a file under it, lexically.
func (d *Dir) rel(path string) (string, error) {
	return beneath(d.cfg.Root, path)
}

// beneath is path relative to dir, refused with ErrEscapes when it is not beneath it.
func beneath(dir, path string) (string, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s: %w", path, ErrEscapes)
	}
	return rel, nil
}

// OwnerUID is the user's uid: the owner of the Owner's pinned directory.
func (d *Dir) OwnerUID() (int, error) {
	o := d
	if d.cfg.Owner != nil {
		o = d.cfg.Owner
	}
	_, uid, err := o.pinned()
	return uid, err
}

// Stat returns the file path names, resolved beneath the user's directory.
func (d *Dir) Stat(path string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := d.in(path, func(r *os.Root, rel string) (err error) {
		fi, err = r.Stat(rel)
		return err
	})
	return fi, err
}

// OpenFile opens for reading the regular file path names, resolved beneath the user's
// directory, without waiting on a named pipe (the file is left non-blocking, which a
// regular file ignores), and checks on the open file that the user owns it (Owned).
func (d *Dir) OpenFile(path string) (*os.File, fs.FileInfo, error) {
	uid, err := d.OwnerUID()
	if err != nil {
		return nil, nil, err
	}
	var f *os.File
	var fi fs.FileInfo
	err = d.in(path, func(r *os.Root, rel string) error {
		f, fi, err = openOwned(r, rel, path, uid)
		return err
	})
	return f, fi, err
}

// openOwned opens rel in r for reading, non-blocking, and checks that it is a regular
// file uid owns.
func openOwned(r *os.Root, rel, path string, uid int) (*os.File, fs.FileInfo, error) {
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s: not a regular file", path)
	default:
		err = Owned(fi, uid)
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// in runs fn on the user's directory, pinned and checked to be still where its path
// leads, and path relative to it; an escape is reported as ErrEscapes.
func (d *Dir) in(path string, fn func(r *os.Root, rel string) error) error {
	rel, err := d.rel(path)
	if err != nil {
		return err
	}
	r, _, err := d.pinned()
	if err != nil {
		return err
	}
	return escapes(path, fn(r, rel))
}

// pinned returns the pinned directory and its owner, pinning it at the first use that
// finds it; at every later use the path must still lead to it (ErrSwapped).
func (d *Dir) pinned() (*os.Root, int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.base == nil {
		if d.cfg.Root == "" {
			return nil, 0, fmt.Errorf("%w: closed", os.ErrClosed)
		}
		b, err := openBase(d.cfg.Base)
		if err != nil {
			return nil, 0, err
		}
		d.base = b
	}
	rel, err := beneath(d.cfg.Base, d.cfg.Root)
	if err != nil {
		return nil, 0, err
	}
	f, id, uid, err := walk(d.base, rel)
	if err != nil {
		err = fmt.Errorf("%s: %w", d.cfg.Root, err)
	}
	if err == nil && d.root != nil && id != d.id {
		_ = f.Close()
		err = fmt.Errorf("%s: %w (device %d inode %d, pinned %d %d)", d.cfg.Root, ErrSwapped, id.dev, id.ino, d.id.dev, d.id.ino)
	}
	if err != nil {
		if d.root == nil {
			return nil, 0, err
		}
		// The path no longer leads to the directory pinned: refused, and told once.
		if !errors.Is(err, ErrSwapped) {
			err = fmt.Errorf("%w: %w", ErrSwapped, err)
		}
		if !d.swapped && d.cfg.OnSwap != nil {
			d.cfg.OnSwap(err)
		}
		d.swapped = true
		return nil, 0, err
	}
	defer func() { _ = f.Close() }()
	d.swapped = false
	if d.root == nil {
		r, err := rootOf(f)
		if err != nil {
			return nil, 0, err
		}
		d.root, d.id, d.uid = r, id, uid
	}
	return d.root, d.uid, nil
}

// escapes turns os.Root's refusal of a path leaving the root (its error is not
// exported; TestEscapeIsRecognized pins its text) into ErrEscapes.
func escapes(path string, err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%s: %w", path, ErrEscapes)
	}
	return err
}
