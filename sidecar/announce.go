package sidecar

import (
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/debounce"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// announcer is the rooms' Notifier: a change goes to the per-notebook debouncer (whose
// flush hands it to the MCP server), a rename to the server at once; both name the hub
// user whose store the room is in ("" outside hub mode).
type announcer struct {
	deb  *debounce.Debouncer[string, change]
	srv  *resources.Server
	user string
}

// Changed debounces a change of the notebook at path.
func (a announcer) Changed(path string, ch ynotebook.Changes, o rooms.Origin) {
	a.deb.Add(path, change{ch, o}, o.At)
}

// Moved tells the server the notebook at oldPath is now at newPath.
func (a announcer) Moved(oldPath, newPath string, o rooms.Origin) {
	a.srv.NotebookMoved(oldPath, newPath, publishOrigin(o, a.user))
}

// change is what the debouncer holds per path: the merged changes of a burst and the
// origin of its newest row.
type change struct {
	ch     ynotebook.Changes
	origin rooms.Origin
}

// mergeChange folds add, a later change of the same path, into old.
func mergeChange(old, add change) change {
	old.ch.Merge(add.ch)
	at := old.origin.At
	if add.origin.At.After(at) {
		at = add.origin.At
	}
	old.origin = add.origin
	old.origin.At = at
	return old
}

// publishOrigin is o as the publisher's events carry it, for the hub user whose store
// the room is in ("" outside hub mode).
func publishOrigin(o rooms.Origin, user string) publish.Origin {
	po := publish.Origin{Room: o.Room.Key, FileID: o.Room.FileID, Time: o.At, User: user}
	if o.File {
		po.Source = "file"
	}
	return po
}
