package yjs

import (
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
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
	// py is pycrdt's reading; yjsRight reports that Yjs reads the same at every
	// checkpoint, so that what only Yjs records (changes, encoded states, other delivery
	// orders) is a reference too.
	py       pycrdtSession
	yjsRight bool
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

// pycrdtSession is what pycrdt (yrs), the Jupyter server's engine, reads from a session:
// testdata/sessions-pycrdt.jsonl.gz, written by testdata/pycrdt-golden/differential.py
// yjs-sessions. It is the reference where Yjs reads differently: the sessions' yjs
// clients insert and delete at any UTF-16 offset, cutting surrogate pairs, which Yjs
// then writes as U+FFFD and yrs keeps whole (splitText), and an item next to content
// collected with its deleted type is dropped by Yjs and kept by yrs (getMissing).
type pycrdtSession struct {
	Seed        int          `json:"seed"`
	Checkpoints []checkpoint `json:"checkpoints"`
	Final       any          `json:"final"`          // after every update in order
	Shuffled    any          `json:"shuffled"`       // after every update in Shuffled.Order
	Twice       any          `json:"shuffled_twice"` // after Shuffled.Order twice
	Merged      any          `json:"merged"`         // after the merged update
}

// gzipJSON decodes the gzipped JSON values in path, one after another, handing each
// decoder step to next until the file ends.
func gzipJSON(t testing.TB, path string, next func(*json.Decoder) error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(zr)
	for dec.More() {
		if err := next(dec); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

func loadSessions(t testing.TB) []session {
	t.Helper()
	var ss []session
	gzipJSON(t, "testdata/sessions.json.gz", func(d *json.Decoder) error { return d.Decode(&ss) })
	py := loadPycrdtSessions(t)
	if len(py) != len(ss) {
		t.Fatalf("%d sessions, %d read by pycrdt: regenerate testdata/sessions-pycrdt.jsonl.gz (scripts/fixtures.sh)", len(ss), len(py))
	}
	for i := range ss {
		s := &ss[i]
		if py[i].Seed != s.Seed || len(py[i].Checkpoints) != len(s.Checkpoints) {
			t.Fatalf("session %d: pycrdt's reading is of another session: regenerate testdata/sessions-pycrdt.jsonl.gz", s.Seed)
		}
		s.py = py[i]
		s.yjsRight = reflect.DeepEqual(asJSON(s.JSON), asJSON(s.py.Final))
		for k, c := range s.Checkpoints {
			s.yjsRight = s.yjsRight && reflect.DeepEqual(asJSON(c.JSON), asJSON(s.py.Checkpoints[k].JSON))
		}
	}
	return ss
}

func loadPycrdtSessions(t testing.TB) []pycrdtSession {
	t.Helper()
	var out []pycrdtSession
	gzipJSON(t, "testdata/sessions-pycrdt.jsonl.gz", func(d *json.Decoder) error {
		var p pycrdtSession
		err := d.Decode(&p)
		out = append(out, p)
		return err
	})
	return out
}

// asJSON is v as encoding/json decodes its JSON: numbers are float64 whichever engine
// wrote them (pycrdt's to_py has floats where Yjs's JSON has integers).
func asJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return err.Error()
	}
	return out
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
	if got := rootJSON(d, sessionRoots); !reflect.DeepEqual(asJSON(got), asJSON(want)) {
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
			for _, c := range s.py.Checkpoints {
				if c.After == i+1 {
					checkJSON(t, "checkpoint", d, c.JSON)
				}
			}
		}
		checkJSON(t, "final", d, s.py.Final)
		if d.HasPending() {
			t.Fatalf("session %d: pending after all updates", s.Seed)
		}
		for _, u := range ups {
			if txn := mustApply(t, d, u); !txn.Empty() {
				t.Fatalf("session %d: re-applying a known update reported %v", s.Seed, txn.Changes())
			}
		}
		checkJSON(t, "after re-applying", d, s.py.Final)
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
// order (for the sessions where Yjs's replica did not edit itself to clean up
// formatting, and Yjs reads as pycrdt does). Out of order, yrs integrates structs that
// Yjs keeps pending (TestSessionsShuffled), so Yjs's changes are no reference there.
func TestSessionsChanges(t *testing.T) {
	for _, s := range loadSessions(t) {
		if !s.yjsRight {
			continue
		}
		ups := s.updates(t)
		inOrder := make([]int, len(ups))
		for i := range inOrder {
			inOrder[i] = i
		}
		checkChanges(t, s.Seed, ups, inOrder, s.Changes)
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

// TestSessionsShuffled delivers the updates out of order, then all of them again in that
// order: the document reads what pycrdt reads after each pass. yrs integrates a struct
// past a gap in its client's clocks when nothing it depends on is missing, where Yjs
// keeps it pending, and retries pending structs only when a client they wait for
// reaches past its last clock, so some stay pending until delivered again.
func TestSessionsShuffled(t *testing.T) {
	for _, s := range loadSessions(t) {
		if len(s.Shuffled.Order) == 0 {
			continue
		}
		ups := s.updates(t)
		d := NewDoc()
		for _, i := range s.Shuffled.Order {
			mustApply(t, d, ups[i])
		}
		checkJSON(t, fmt.Sprintf("session %d shuffled", s.Seed), d, s.py.Shuffled)
		for _, i := range s.Shuffled.Order {
			mustApply(t, d, ups[i])
		}
		checkJSON(t, fmt.Sprintf("session %d shuffled, twice", s.Seed), d, s.py.Twice)
	}
}

func TestSessionsMerged(t *testing.T) {
	for _, s := range loadSessions(t) {
		d := NewDoc()
		mustApply(t, d, mustB64(t, s.Merged))
		checkJSON(t, "merged", d, s.py.Merged)
	}
}

// TestSessionsEncodeState re-encodes the state (whole and as a diff against each
// checkpoint) and applies it in Go. Every state decodes to the same structs, clocks and
// state vector; where a yjs client cut a surrogate pair, the text is written as Yjs
// writes it (unitsExactly), so the document is compared only where Yjs reads as pycrdt.
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
		if !reflect.DeepEqual(d2.StateVector(), d.StateVector()) {
			t.Fatalf("session %d: re-encoded state vector %v, want %v", s.Seed, d2.StateVector(), d.StateVector())
		}
		if again, err := d2.EncodeStateAsUpdate(nil); err != nil || !reflect.DeepEqual(gcMerged(t, again), gcMerged(t, state)) {
			t.Fatalf("session %d: re-encoding the re-encoded state changed it (%v)", s.Seed, err)
		}
		if !s.yjsRight {
			continue
		}
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

// TestSessionsStateLikeYjs checks that after the same updates in order the store holds
// the same structs as Yjs's: same splits, merges, garbage collection and delete set.
func TestSessionsStateLikeYjs(t *testing.T) {
	for _, s := range loadSessions(t) {
		if !s.yjsRight {
			continue
		}
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
	testenv.Need(t, err, "node, and npm ci in testdata/yjs-golden")
	type rtCase struct {
		Name  string `json:"name"`
		State string `json:"state"`
		JSON  any    `json:"json"`
	}
	var cases []rtCase
	for _, s := range loadSessions(t) {
		if !s.yjsRight {
			continue
		}
		ups := s.updates(t)
		rng := rand.New(rand.NewPCG(uint64(s.Seed), 9))
		d := NewDoc()
		for _, i := range rng.Perm(len(ups)) {
			mustApply(t, d, ups[i])
		}
		for _, u := range ups { // what stayed pending, as yrs leaves it, arrives again
			mustApply(t, d, u)
		}
		if d.HasPending() {
			t.Fatalf("session %d: pending after every update twice", s.Seed)
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

// gcMerged decodes an update and merges adjacent GC structs (a document merges the GC
// structs it reads, where the one that wrote them kept runs collected apart).
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
