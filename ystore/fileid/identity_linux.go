package fileid

import (
	"os"
	"syscall"
)

// fileIdentity is what tells a replaced file from an edited one: device and inode.
type fileIdentity struct{ dev, ino uint64 }

// identity returns fi's identity.
func identity(fi os.FileInfo) fileIdentity {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileIdentity{}
	}
	return fileIdentity{dev: st.Dev, ino: st.Ino}
}
