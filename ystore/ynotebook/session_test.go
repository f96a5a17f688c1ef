package ynotebook

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"testing"
)

// sessionsDir holds the sessions written by testdata/ysessions/gen.mjs.
const sessionsDir = "../../testdata/ysessions/fixtures"

type session struct {
	Name    string `json:"-"`
	Seed    int64  `json:"seed"`
	Layout  string `json:"layout"`
	Updates []struct {
		Client int    `json:"client"`
		Update []byte `json:"update"`
	} `json:"updates"`
	Merged      []byte `json:"merged"`
	Checkpoints []struct {
		After    int             `json:"after"`
		Notebook json.RawMessage `json:"notebook"`
		State    map[string]any  `json:"state"`
	} `json:"checkpoints"`
}

// loadSessions reads the sessions once per test binary; tests must not modify them.
var loadSessions = func() func(testing.TB) []*session {
	var (
		once     sync.Once
		sessions []*session
		err      error
	)
	return func(t testing.TB) []*session {
		t.Helper()
		once.Do(func() { sessions, err = readSessions() })
		if err != nil {
			t.Fatal(err)
		}
		return sessions
	}
}()

func readSessions() ([]*session, error) {
	files, err := filepath.Glob(filepath.Join(sessionsDir, "*.json.gz"))
	if err != nil {
		return nil, err
	}
	if len(files) < 200 {
		return nil, fmt.Errorf("want at least 200 sessions in %s, have %d", sessionsDir, len(files))
	}
	out := make([]*session, 0, len(files))
	for _, f := range files {
		s, err := readSession(f)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func readSession(file string) (*session, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	s := &session{Name: filepath.Base(file)}
	if err := json.NewDecoder(zr).Decode(s); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

func (s *session) updates() [][]byte {
	out := make([][]byte, len(s.Updates))
	for i, u := range s.Updates {
		out[i] = u.Update
	}
	return out
}

// parsed decodes JSON into plain values for comparison.
func parsed(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("parse %s: %v", b, err)
	}
	return v
}

// requireJSON fails unless the snapshot equals want (nbformat JSON from YNotebook.toJSON).
func requireJSON(t testing.TB, what string, s *Snapshot, want []byte) {
	t.Helper()
	got, err := s.JSON()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	g, w := parsed(t, got), parsed(t, want)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: snapshot differs from Yjs at %s\n got: %s\nwant: %s", what, firstDiff("$", g, w), got, want)
	}
}

// firstDiff names the first path at which a and b differ.
func firstDiff(path string, a, b any) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return path
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if !reflect.DeepEqual(x[k], y[k]) {
				return firstDiff(path+"."+k, x[k], y[k])
			}
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return fmt.Sprintf("%s (len %d vs %v)", path, len(x), b)
		}
		for i := range x {
			if !reflect.DeepEqual(x[i], y[i]) {
				return firstDiff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i])
			}
		}
	}
	return fmt.Sprintf("%s: %#v vs %#v", path, a, b)
}

func requireState(t testing.TB, what string, got State, want map[string]any) {
	t.Helper()
	w := State{}
	w.Path, _ = want["path"].(string)
	w.Dirty = want["dirty"] == true
	if got != w {
		t.Fatalf("%s: state %+v, want %+v", what, got, w)
	}
}
