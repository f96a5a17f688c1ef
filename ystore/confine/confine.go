// Package confine opens what the sidecar reads for one hub-mode user beneath that user's
// directory. The hub-mode sidecar may read every home (the systemd unit gives it
// CAP_DAC_READ_SEARCH), so a path a user controls (a symbolic link in their home, their
// store replaced by a link) must not lead it to another user's files: every path is
// resolved beneath the Dir's root by os.Root (symbolic links are followed only while
// they stay inside it; absolute ones and ones leaving it are refused), and the files
// that decide what a user is served (their Y-store, their file id database) must
// belong to the owner of the user's directory.
package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrRefused is wrapped by every error of a path the confinement refuses.
var ErrRefused = errors.New("refused")

// ErrEscapes is wrapped by the error of a path that leads outside the user's directory
// (through a symbolic link, or "..").
var ErrEscapes = fmt.Errorf("%w: leads outside the user's directory", ErrRefused)

// ErrNotOwned is wrapped by the error of a file not owned by the user.
var ErrNotOwned = fmt.Errorf("%w: not owned by the user", ErrRefused)

// Dir is one user's directory.
type Dir struct {
	// Root is the directory paths are resolved beneath.
	Root string
	// Owner is the directory whose owner is the user: files checked with Owned must
	// belong to that owner. "" checks nothing.
	Owner string
}

// rel is path relative to d.Root; path is absolute (or relative to the working
// directory) and names a file under d.Root, lexically.
func (d Dir) rel(path string) (string, error) {
	root, err := filepath.Abs(d.Root)
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

// Stat returns the file path names, resolved beneath d.Root.
func (d Dir) Stat(path string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := d.in(path, func(r *os.Root, rel string) (err error) {
		fi, err = r.Stat(rel)
		return err
	})
	return fi, err
}

// Open opens the file path names, resolved beneath d.Root, with flag (os.O_RDONLY and
// the like; add syscall.O_NONBLOCK where a named pipe may be met).
func (d Dir) Open(path string, flag int) (*os.File, error) {
	var f *os.File
	err := d.in(path, func(r *os.Root, rel string) (err error) {
		f, err = r.OpenFile(rel, flag, 0)
		return err
	})
	return f, err
}

// in runs fn on d.Root opened as an os.Root and path relative to it; an escape is
// reported as ErrEscapes.
func (d Dir) in(path string, fn func(r *os.Root, rel string) error) error {
	rel, err := d.rel(path)
	if err != nil {
		return err
	}
	r, err := os.OpenRoot(d.Root)
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	return escapes(path, fn(r, rel))
}

// escapes turns os.Root's refusal of a path leaving the root (its error is not
// exported; TestEscapeIsRecognized pins its text) into ErrEscapes.
func escapes(path string, err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%s: %w", path, ErrEscapes)
	}
	return err
}
