//go:build !linux

package fileid

import "os"

// fileIdentity is empty where the platform's inode fields are not read: size and
// modification time alone tell versions apart.
type fileIdentity struct{}

// identity returns fi's identity.
func identity(os.FileInfo) fileIdentity { return fileIdentity{} }
