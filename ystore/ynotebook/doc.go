// Package ynotebook is the jupyter_ydoc notebook view of a Yjs document: it materializes
// the layout that @jupyter/ydoc and jupyter_ydoc write (a "cells" array of cell maps and a
// "meta" map) into snapshots equal to jupyter_ydoc's YNotebook.get() (what the Jupyter
// server holds and saves, valid nbformat 4.5 or not), and reports what
// each applied update changed at the granularity of cells, sources, metadata and outputs.
//
// The package is pure: no I/O, no logging.
package ynotebook
