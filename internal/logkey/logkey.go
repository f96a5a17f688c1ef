// Package logkey names the attributes that log lines of every layer share, so that a
// room or a notebook is found under one key whichever package logged it.
package logkey

// The shared log attribute keys.
const (
	Room = "room" // a store room key, ".notebook:<file id>.y"
	Path = "path" // a notebook path, relative to the Jupyter root
)
