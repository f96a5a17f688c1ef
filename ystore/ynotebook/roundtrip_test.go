package ynotebook

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

// yjsDir is the npm project holding yjs and @jupyter/ydoc.
const yjsDir = "../../testdata/ysessions"

// requireNode returns node; without it or the npm packages the test skips, or fails on CI.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(yjsDir, "node_modules", "@jupyter", "ydoc"))
	}
	testenv.Need(t, err, "node, and npm ci in "+yjsDir)
	return node
}

// TestRoundTripThroughYjs encodes every session's final state with our engine, applies it
// in Yjs and compares YNotebook.toJSON() with the session's last checkpoint: the sessions
// that Yjs reads as pycrdt does (ysessions.Session.YjsRight).
func TestRoundTripThroughYjs(t *testing.T) {
	node := requireNode(t)
	var sessions []*ysessions.Session
	for _, s := range ysessions.All(t) {
		if s.YjsRight() {
			sessions = append(sessions, s)
		}
	}
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, s := range sessions {
		nb := applyAll(t, s.UpdateBytes())
		state, err := nb.Doc().EncodeStateAsUpdate(nil)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if err := enc.Encode(map[string]any{"name": s.Name, "update": state}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(node, "roundtrip.mjs")
	cmd.Dir = yjsDir
	cmd.Stdin = &in
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("roundtrip.mjs: %v", err)
	}
	type result struct {
		Name     string          `json:"name"`
		Notebook json.RawMessage `json:"notebook"`
		State    map[string]any  `json:"state"`
		Pending  bool            `json:"pending"`
	}
	got := map[string]result{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("roundtrip.mjs output: %v", err)
		}
		got[r.Name] = r
	}
	for _, s := range sessions {
		r, ok := got[s.Name]
		if !ok {
			t.Fatalf("%s: no result from roundtrip.mjs", s.Name)
		}
		last := s.Final()
		if r.Pending {
			t.Errorf("%s: Yjs holds pending structs after applying our encoded state", s.Name)
		}
		if !bytes.Equal(mustCanon(t, r.Notebook), mustCanon(t, last.Notebook)) {
			t.Errorf("%s: Yjs reads our encoded state as %s\nwant %s", s.Name, r.Notebook, last.Notebook)
		}
		if !bytes.Equal(mustCanon(t, mustJSON(t, r.State)), mustCanon(t, mustJSON(t, last.State))) {
			t.Errorf("%s: state %v, want %v", s.Name, r.State, last.State)
		}
	}
}

// mustCanon re-encodes JSON with sorted keys.
func mustCanon(t *testing.T, b []byte) []byte {
	t.Helper()
	return mustJSON(t, parsed(t, b))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
