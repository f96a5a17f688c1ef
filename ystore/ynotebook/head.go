package ynotebook

// Head returns the members of the snapshot's JSON other than "cells": metadata,
// nbformat and nbformat_minor as stored, each only when the document holds it. The map
// is new; its values are shared with the snapshot: do not modify them.
func (s *Snapshot) Head() map[string]any {
	h := make(map[string]any, 4)
	if s.Metadata != nil {
		h["metadata"] = s.Metadata
	}
	if s.hasNBFormat {
		h["nbformat"] = s.nbformat
	}
	if s.hasMinor {
		h["nbformat_minor"] = s.nbformatMinor
	}
	return h
}

// ServesIDs reports whether JSON gives each cell its id: false for nbformat 4.0–4.4,
// whose cells have none.
func (s *Snapshot) ServesIDs() bool { return !s.pruneIDs }
