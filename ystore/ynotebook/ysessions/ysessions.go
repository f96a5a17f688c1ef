// Package ysessions reads, for the tests of any package, the concurrent notebook
// sessions that testdata/ysessions/gen.mjs records with the real yjs and @jupyter/ydoc:
// every update in the order it was made, the update Y.mergeUpdates makes of them, and
// checkpoints of YNotebook.toJSON() along the way, the last one after every update.
package ysessions

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Session is one recorded session.
type Session struct {
	Name        string       `json:"-"` // file name, e.g. s0000.json.gz
	Seed        int64        `json:"seed"`
	Layout      string       `json:"layout"` // jupyter-ydoc-4 or jupyter_ydoc-2
	Updates     []Update     `json:"updates"`
	Merged      []byte       `json:"merged"`
	Checkpoints []Checkpoint `json:"checkpoints"`
}

// Update is one Yjs update and the client that made it.
type Update struct {
	Client int    `json:"client"`
	Update []byte `json:"update"`
}

// Checkpoint is the notebook after the first After updates, as Yjs sees it.
type Checkpoint struct {
	After    int             `json:"after"`
	Notebook json.RawMessage `json:"notebook"` // YNotebook.toJSON()
	State    map[string]any  `json:"state"`    // the document's state map
}

// UpdateBytes returns the updates alone, in order.
func (s *Session) UpdateBytes() [][]byte {
	out := make([][]byte, len(s.Updates))
	for i, u := range s.Updates {
		out[i] = u.Update
	}
	return out
}

// Final is the checkpoint after every update.
func (s *Session) Final() Checkpoint { return s.Checkpoints[len(s.Checkpoints)-1] }

// Dir is the directory of the recorded sessions.
func Dir() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "..", "testdata", "ysessions", "fixtures")
}

// Read reads the session file name (e.g. s0000.json.gz) from Dir.
func Read(name string) (*Session, error) {
	s := &Session{Name: name}
	if err := ReadGzipJSON(filepath.Join(Dir(), name), s); err != nil {
		return nil, err
	}
	if len(s.Checkpoints) == 0 || s.Final().After != len(s.Updates) {
		return nil, fmt.Errorf("%s: no checkpoint after all %d updates", name, len(s.Updates))
	}
	return s, nil
}

// ReadGzipJSON decodes the gzipped JSON file at path into v: the format of the recorded
// sessions and of other fixtures written by Node scripts.
func ReadGzipJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := json.NewDecoder(zr).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Load reads one session or fails the test.
func Load(t testing.TB, name string) *Session {
	t.Helper()
	s, err := Read(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// minSessions is how many sessions All requires.
const minSessions = 200

var all = sync.OnceValues(func() ([]*Session, error) {
	files, err := filepath.Glob(filepath.Join(Dir(), "*.json.gz"))
	if err != nil {
		return nil, err
	}
	if len(files) < minSessions {
		return nil, fmt.Errorf("want at least %d sessions in %s, have %d", minSessions, Dir(), len(files))
	}
	out := make([]*Session, 0, len(files))
	for _, f := range files {
		s, err := Read(filepath.Base(f))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
})

// All reads every session once per test binary, in name order, or fails the test.
// Callers share the sessions and must not modify them.
func All(t testing.TB) []*Session {
	t.Helper()
	ss, err := all()
	if err != nil {
		t.Fatal(err)
	}
	return ss
}
