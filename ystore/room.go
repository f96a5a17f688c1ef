package ystore

import (
	"path"
	"strings"
)

// RoomKind classifies a room by its document type.
type RoomKind int

const (
	// KindOther is any document type that is neither a notebook nor a plain file.
	KindOther RoomKind = iota
	// KindNotebook is a Jupyter notebook (jupyter_ydoc YNotebook).
	KindNotebook
	// KindFile is a plain text file (jupyter_ydoc YUnicode).
	KindFile
)

// String names the kind for logs.
func (k RoomKind) String() string {
	switch k {
	case KindNotebook:
		return "notebook"
	case KindFile:
		return "file"
	default:
		return "other"
	}
}

// Room is a parsed room key. Exactly one of FileID and Path is set.
type Room struct {
	// Key is the room key as stored.
	Key string
	// Kind is derived from Type.
	Kind RoomKind
	// Type is the document type named in the key ("notebook", "file", …).
	Type string
	// Format is the content format of a websocket room id ("json", "text"), else empty.
	Format string
	// FileID is the jupyter_server_fileid id for keys that name one.
	FileID string
	// Path is the file path for keys that name a path (jupyter-collaboration 1.x).
	Path string
}

// ParseRoom parses the room keys jupyter-collaboration gives its Y-store:
//
//	.notebook:<file_id>.y         the store path of jupyter-collaboration ≥ 2
//	<dir>/.notebook:<filename>.y  path-keyed stores of jupyter-collaboration 1.x
//	.notebook:<filename>.y        the same for a file in the root directory
//	json:notebook:<file_id>       a websocket room id ({format}:{type}:{file_id})
//	json:notebook:<path>          the websocket room id of jupyter-collaboration 1.x
//
// with any document type in place of "notebook". The id part names a file id unless it
// looks like a path (contains "/" or "."), since file ids are UUIDs. ParseRoom reports
// false for keys of none of these forms, such as transient rooms.
func ParseRoom(key string) (Room, bool) {
	dir, base := "", key
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		dir, base = key[:i], key[i+1:]
	}
	if typ, id, ok := parseStoreName(base); ok {
		r := Room{Key: key, Kind: kindOf(typ), Type: typ}
		switch {
		case len(base) < len(key):
			r.Path = path.Clean(dir + "/" + id)
		case looksLikePath(id):
			r.Path = path.Clean(id)
		default:
			r.FileID = id
		}
		return r, true
	}
	parts := strings.SplitN(key, ":", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" ||
		strings.ContainsAny(parts[0]+parts[1], "./") {
		return Room{}, false
	}
	r := Room{Key: key, Kind: kindOf(parts[1]), Type: parts[1], Format: parts[0]}
	if looksLikePath(parts[2]) {
		r.Path = path.Clean(parts[2])
	} else {
		r.FileID = parts[2]
	}
	return r, true
}

// parseStoreName splits ".<type>:<id>.y" into type and id.
func parseStoreName(base string) (typ, id string, ok bool) {
	if len(base) < len(".:.y") || base[0] != '.' || !strings.HasSuffix(base, ".y") {
		return "", "", false
	}
	typ, id, ok = strings.Cut(base[1:len(base)-2], ":")
	if !ok || typ == "" || id == "" || strings.ContainsAny(typ, ".") {
		return "", "", false
	}
	return typ, id, true
}

// looksLikePath tells a file name or path from a file id.
func looksLikePath(id string) bool {
	return strings.ContainsAny(id, "/.")
}

// kindOf maps a document type to its kind.
func kindOf(typ string) RoomKind {
	switch typ {
	case "notebook":
		return KindNotebook
	case "file":
		return KindFile
	default:
		return KindOther
	}
}
