package yjs

import (
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/testutil"
)

// session is one random editing session written by testdata/yjs-golden/sessions.mjs.
type session struct {
	Seed        int          `json:"seed"`
	Updates     []string     `json:"updates"`
	Merged      string       `json:"merged"`
	Checkpoints []checkpoint `json:"checkpoints"`
	JSON        any          `json:"json"`
	Changes     [][]change   `json:"changes"`
	State       *string      `json:"state"`
	Shuffled    struct {
		Order   []int      `json:"order"`
		Changes [][]change `json:"changes"`
		State   *string    `json:"state"`
	} `json:"shuffled"`
}

// change is one entry of a Yjs transaction.changed, the type named by its path.
type change struct {
	Path []any    `json:"path"`
	Keys []string `json:"keys"`
	Seq  bool     `json:"seq"`
}

type checkpoint struct {
	After int `json:"after"`
	JSON  any `json:"json"`
}

func loadSessions(t testing.TB) []session {
	t.Helper()
	f, err := os.Open("testdata/sessions.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var ss []session
	if err := json.NewDecoder(zr).Decode(&ss); err != nil {
		t.Fatal(err)
	}
	return ss
}

func (s *session) updates(t testing.TB) [][]byte {
	t.Helper()
	out := make([][]byte, len(s.Updates))
	for i, u := range s.Updates {
		out[i] = mustB64(t, u)
	}
	return out
}

func mustB64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var sessionRoots = map[string]string{"t": "text", "a": "array", "m": "map"}

func mustApply(t testing.TB, d *Doc, u []byte) *Txn {
	t.Helper()
	txn, err := d.ApplyUpdate(u)
	if err != nil {
		t.Fatal(err)
	}
	return txn
}

// applyAll applies updates in order to a new document.
func applyAll(t testing.TB, ups [][]byte) *Doc {
	t.Helper()
	d := NewDoc()
	for _, u := range ups {
		mustApply(t, d, u)
	}
	return d
}

func checkJSON(t *testing.T, what string, d *Doc, want any) {
	t.Helper()
	if got := rootJSON(d, sessionRoots); !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Fatalf("%s:\n got %s\nwant %s", what, gb, wb)
	}
}

func TestSessionsInOrder(t *testing.T) {
	for _, s := range loadSessions(t) {
		ups := s.updates(t)
		d := NewDoc()
		for i, u := range ups {
			mustApply(t, d, u)
			for _, c := range s.Checkpoints {
				if c.After == i+1 {
					checkJSON(t, "checkpoint", d, c.JSON)
				}
			}
		}
		checkJSON(t, "final", d, s.JSON)
		if d.HasPending() {
			t.Fatalf("session %d: pending after all updates", s.Seed)
		}
		for _, u := range ups {
			if txn := mustApply(t, d, u); !txn.Empty() {
				t.Fatalf("session %d: re-applying a known update reported %v", s.Seed, txn.Changes())
			}
		}
		checkJSON(t, "after re-applying", d, s.JSON)
	}
}

// pathOf names typ like sessions.mjs: root name, then map keys and array indexes.
func pathOf(d *Doc, typ *Type) []any {
	var path []any
	for !typ.Root() {
		parent, key, hasKey := typ.Parent()
		if hasKey {
			path = append([]any{key}, path...)
		} else {
			path = append([]any{float64(typ.Index())}, path...)
		}
		typ = parent
	}
	for _, name := range d.Roots() {
		if r, _ := d.Root(name); r == typ {
			path = append([]any{name}, path...)
		}
	}
	return path
}

func txnChanges(d *Doc, txn *Txn) []string {
	var out []string
	for _, c := range txn.Changes() {
		b, _ := json.Marshal(change{Path: pathOf(d, c.Type), Keys: append([]string{}, c.Keys...), Seq: c.Seq})
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

// TestSessionsChanges compares each update's Txn with Yjs's transaction.changed, in
// order and in a shuffled order (for the sessions where Yjs's replica did not edit
// itself to clean up formatting).
func TestSessionsChanges(t *testing.T) {
	for _, s := range loadSessions(t) {
		ups := s.updates(t)
		inOrder := make([]int, len(ups))
		for i := range inOrder {
			inOrder[i] = i
		}
		checkChanges(t, s.Seed, ups, inOrder, s.Changes)
		checkChanges(t, s.Seed, ups, s.Shuffled.Order, s.Shuffled.Changes)
	}
}

func checkChanges(t *testing.T, seed int, ups [][]byte, order []int, want [][]change) {
	t.Helper()
	if want == nil {
		return
	}
	d := NewDoc()
	for i, u := range order {
		got := txnChanges(d, mustApply(t, d, ups[u]))
		var w []string
		for _, c := range want[i] {
			b, _ := json.Marshal(c)
			w = append(w, string(b))
		}
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Fatalf("session %d, step %d (update %d): changes\n got %v\nwant %v", seed, i, u, got, w)
		}
	}
}

func TestSessionsShuffledDuplicated(t *testing.T) {
	for _, s := range loadSessions(t) {
		ups := s.updates(t)
		rng := rand.New(rand.NewPCG(uint64(s.Seed), 7))
		order := append(rng.Perm(len(ups)), rng.Perm(len(ups))[:len(ups)/3]...)
		d := NewDoc()
		for _, i := range order {
			mustApply(t, d, ups[i])
		}
		checkJSON(t, "shuffled", d, s.JSON)
		if d.HasPending() {
			t.Fatalf("session %d: pending after all updates", s.Seed)
		}
	}
}

func TestSessionsMerged(t *testing.T) {
	for _, s := range loadSessions(t) {
		d := NewDoc()
		mustApply(t, d, mustB64(t, s.Merged))
		checkJSON(t, "merged", d, s.JSON)
	}
}

// TestSessionsEncodeState re-encodes the state (whole and as a diff against each
// checkpoint) and applies it in Go.
func TestSessionsEncodeState(t *testing.T) {
	for _, s := range loadSessions(t) {
		ups := s.updates(t)
		d := applyAll(t, ups)
		state, err := d.EncodeStateAsUpdate(nil)
		if err != nil {
			t.Fatal(err)
		}
		d2 := NewDoc()
		mustApply(t, d2, state)
		checkJSON(t, "re-encoded", d2, s.JSON)
		for _, c := range s.Checkpoints {
			old := applyAll(t, ups[:c.After])
			diff, err := d.EncodeStateAsUpdate(old.EncodeStateVector())
			if err != nil {
				t.Fatal(err)
			}
			mustApply(t, old, diff)
			checkJSON(t, "checkpoint plus diff", old, s.JSON)
		}
	}
}

// sameStructs compares the structs and deletes of two updates; Any objects compare as
// maps, so the key order Yjs keeps does not matter.
func sameStructs(t testing.TB, got, want []byte) bool {
	t.Helper()
	g, err := DecodeUpdate(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := DecodeUpdate(want)
	if err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(g, w)
}

// TestSessionsStateLikeYjs checks that after the same updates the store holds the same
// structs as Yjs's: same splits, merges, garbage collection and delete set.
func TestSessionsStateLikeYjs(t *testing.T) {
	for _, s := range loadSessions(t) {
		ups := s.updates(t)
		if s.State != nil {
			state, err := applyAll(t, ups).EncodeStateAsUpdate(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !sameStructs(t, state, mustB64(t, *s.State)) {
				t.Fatalf("session %d: encoded state differs from Yjs's", s.Seed)
			}
		}
		if s.Shuffled.State != nil {
			shuffled := make([][]byte, len(ups))
			for i, u := range s.Shuffled.Order {
				shuffled[i] = ups[u]
			}
			state, err := applyAll(t, shuffled).EncodeStateAsUpdate(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !sameStructs(t, state, mustB64(t, *s.Shuffled.State)) {
				t.Fatalf("session %d: encoded state after shuffled delivery differs from Yjs's", s.Seed)
			}
		}
	}
}

// TestSessionsRoundTripYjs applies Go's encoded states in real Yjs (node roundtrip.mjs).
// It needs `npm ci` in testdata/yjs-golden; CI runs it.
func TestSessionsRoundTripYjs(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "yjs-golden")
	_, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "yjs"))
	}
	testutil.Need(t, err, "node, and npm ci in testdata/yjs-golden")
	type rtCase struct {
		Name  string `json:"name"`
		State string `json:"state"`
		JSON  any    `json:"json"`
	}
	var cases []rtCase
	for _, s := range loadSessions(t) {
		ups := s.updates(t)
		rng := rand.New(rand.NewPCG(uint64(s.Seed), 9))
		d := NewDoc()
		for _, i := range rng.Perm(len(ups)) {
			mustApply(t, d, ups[i])
		}
		state, err := d.EncodeStateAsUpdate(nil)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, rtCase{Name: fmt.Sprint("session ", s.Seed), State: base64.StdEncoding.EncodeToString(state), JSON: s.JSON})
	}
	path := filepath.Join(t.TempDir(), "roundtrip.json")
	b, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "roundtrip.mjs", path)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node roundtrip.mjs: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestSessionsBatched applies each session, in order and shuffled with duplicates, in
// batches of one transaction each: the document and its structs are those of applying
// the updates one by one, except that garbage-collected runs deleted by different
// updates of a batch are merged (cleanup runs once per transaction, as in Yjs).
func TestSessionsBatched(t *testing.T) {
	for _, s := range loadSessions(t) {
		ups := s.updates(t)
		rng := rand.New(rand.NewPCG(uint64(s.Seed), 9))
		var shuffled [][]byte
		for _, i := range append(rng.Perm(len(ups)), rng.Perm(len(ups))[:len(ups)/3]...) {
			shuffled = append(shuffled, ups[i])
		}
		for _, order := range [][][]byte{ups, shuffled} {
			want, err := applyAll(t, order).EncodeStateAsUpdate(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, size := range []int{1, 7, len(order)} {
				d := NewDoc()
				for batch := range slices.Chunk(order, size) {
					if _, err := d.ApplyUpdates(batch); err != nil {
						t.Fatal(err)
					}
				}
				checkJSON(t, fmt.Sprintf("session %d in batches of %d", s.Seed, size), d, s.JSON)
				if d.HasPending() {
					t.Fatalf("session %d, batches of %d: pending after all updates", s.Seed, size)
				}
				got, err := d.EncodeStateAsUpdate(nil)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(gcMerged(t, got), gcMerged(t, want)) {
					t.Fatalf("session %d, batches of %d: structs differ from applying one by one", s.Seed, size)
				}
			}
		}
	}
}

// gcMerged decodes an update and merges adjacent GC structs.
func gcMerged(t *testing.T, b []byte) *Update {
	t.Helper()
	u, err := DecodeUpdate(b)
	if err != nil {
		t.Fatal(err)
	}
	for c, list := range u.Structs {
		var out []Struct
		for _, st := range list {
			if n := len(out); n > 0 && st.Kind == "GC" && out[n-1].Kind == "GC" {
				out[n-1].Len += st.Len
				continue
			}
			out = append(out, st)
		}
		u.Structs[c] = out
	}
	return u
}

// TestApplyUpdatesAtomic: a malformed update in a batch leaves the document unchanged,
// even when the updates before it are valid.
func TestApplyUpdatesAtomic(t *testing.T) {
	first := loadSessions(t)[0].updates(t)[0]
	d := NewDoc()
	_, err := d.ApplyUpdates([][]byte{first, {0xff}})
	var de *DecodeError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "update 1") {
		t.Fatalf("ApplyUpdates with a malformed second update: %v", err)
	}
	if len(d.StateVector()) != 0 || d.HasPending() {
		t.Fatal("a failed ApplyUpdates changed the document")
	}
}
