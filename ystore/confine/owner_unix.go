//go:build unix

package confine

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Owned checks that fi, a file opened for the user, belongs to uid: a file of another
// owner is refused, a hard link to another user's file included (a link keeps its
// file's owner). A hard link of the user's own (more than one link, owned by uid) is
// accepted: it leads to nothing the user could not read anyway. Except when uid is
// root's or the sidecar's own: the owner then does not tell the user's files from the
// system's, and a regular file with more than one link is refused.
func Owned(fi fs.FileInfo, uid int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s (owner unknown): %w", fi.Name(), ErrNotOwned)
	}
	return CheckOwner(fi.Name(), int(st.Uid), uint64(st.Nlink), fi.Mode().IsRegular(), uid)
}

// CheckOwner is Owned of a file name, owned by owner, with nlink links, regular or not.
func CheckOwner(name string, owner int, nlink uint64, regular bool, uid int) error {
	if owner != uid {
		return fmt.Errorf("%s (owner uid %d, the user is uid %d): %w", name, owner, uid, ErrNotOwned)
	}
	if regular && nlink > 1 && (uid == 0 || uid == os.Geteuid()) {
		return fmt.Errorf("%s (%d hard links, owner uid %d: the sidecar's own or root's): %w", name, nlink, uid, ErrNotOwned)
	}
	return nil
}
