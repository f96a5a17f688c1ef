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
	// PycrdtMerged is pycrdt's reading of Merged.
	PycrdtMerged Reading `json:"-"`
}

// YjsRight reports that Yjs reads every checkpoint as pycrdt does: the sessions in which
// what only Yjs records (other delivery orders, its reading of an encoded state) is a
// reference too.
func (s *Session) YjsRight() bool {
	for _, c := range s.Checkpoints {
		if !c.YjsSame {
			return false
		}
	}
	return true
}

// Update is one Yjs update and the client that made it.
type Update struct {
	Client int    `json:"client"`
	Update []byte `json:"update"`
}

// Checkpoint is the notebook after the first After updates, as Yjs sees it, and as
// pycrdt (the Jupyter server's engine) does.
type Checkpoint struct {
	After    int             `json:"after"`
	Notebook json.RawMessage `json:"notebook"` // YNotebook.toJSON()
	State    map[string]any  `json:"state"`    // the document's state map
	Pycrdt   Reading         `json:"-"`
	// YjsSame reports that Yjs's checkpoint holds the texts pycrdt reads (ids, sources,
	// output texts): where it does not, Yjs is no reference (a yjs client cut a surrogate
	// pair, which Yjs writes as U+FFFD and yrs keeps whole, or an item lands next to
	// collected content, which Yjs drops and yrs keeps).
	YjsSame bool `json:"-"`
}

// Reading is what pycrdt and jupyter_ydoc read from a session's updates
// (testdata/pycrdt-golden/differential.py notebook-sessions, in pycrdt.jsonl.gz beside
// the sessions).
type Reading struct {
	Doc  json.RawMessage `json:"doc"`  // pycrdt's to_py of the roots cells, meta and state
	Get  json.RawMessage `json:"get"`  // jupyter_ydoc's YNotebook.get()
	Reid []int           `json:"reid"` // indexes of get()'s cells it gave a new id
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
	readings, err := readPycrdt()
	if err != nil {
		return nil, err
	}
	out := make([]*Session, 0, len(files))
	for _, f := range files {
		s, err := Read(filepath.Base(f))
		if err != nil {
			return nil, err
		}
		r, ok := readings[s.Name]
		if !ok || len(r.Checkpoints) != len(s.Checkpoints) {
			return nil, fmt.Errorf("%s: no pycrdt reading of it in %s: regenerate it (scripts/fixtures.sh)", s.Name, pycrdtFile)
		}
		for i := range s.Checkpoints {
			s.Checkpoints[i].Pycrdt = r.Checkpoints[i].Reading
			s.Checkpoints[i].YjsSame = r.Checkpoints[i].YjsSame
		}
		s.PycrdtMerged = r.Merged
		out = append(out, s)
	}
	return out, nil
})

// pycrdtFile holds pycrdt's readings of the sessions, one JSON line per session.
const pycrdtFile = "pycrdt.jsonl.gz"

type pycrdtSession struct {
	Name        string `json:"name"`
	Checkpoints []struct {
		Reading
		YjsSame bool `json:"yjs_same"`
	} `json:"checkpoints"`
	Merged Reading `json:"merged"`
}

// readPycrdt reads pycrdtFile from the directory above Dir, by session name.
func readPycrdt() (map[string]*pycrdtSession, error) {
	path := filepath.Join(Dir(), "..", pycrdtFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]*pycrdtSession{}
	dec := json.NewDecoder(zr)
	for dec.More() {
		var s pycrdtSession
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[s.Name] = &s
	}
	return out, nil
}

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
