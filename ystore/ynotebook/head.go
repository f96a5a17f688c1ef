package ynotebook

// Head returns the members of the snapshot's JSON other than "cells", as get() has
// them: metadata, nbformat and nbformat_minor, always. The map is new; its values are
// shared with the snapshot: do not modify them.
func (s *Snapshot) Head() map[string]any {
	return map[string]any{"metadata": s.metadataJSON(), "nbformat": s.NBFormat, "nbformat_minor": s.NBFormatMinor}
}

// ServesIDs reports whether JSON gives each cell its id: false for nbformat 4.0–4.4,
// whose cells have none.
func (s *Snapshot) ServesIDs() bool { return !s.pruneIDs }
