package sidecartest

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish/publishtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/publishers"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
)

// EventFixture is sidecar/e2e/testdata/events.json, made by testdata/mcpclient/gen-events.mjs with
// @jupyter/ydoc: a notebook (cells c1, c2) and edits, each named.
type EventFixture struct {
	Initial []byte
	Edits   map[string][]byte
}

// LoadEventFixture reads the event fixture.
func LoadEventFixture(t testing.TB) EventFixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot, "sidecar", "e2e", "testdata", "events.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Initial string `json:"initial"`
		Edits   []struct{ Name, Update string }
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	dec := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	f := EventFixture{Initial: dec(doc.Initial), Edits: map[string][]byte{}}
	for _, e := range doc.Edits {
		f.Edits[e.Name] = dec(e.Update)
	}
	return f
}

// NotebookRoom is one notebook of an events test: its path, file id and room key.
type NotebookRoom struct{ Path, FileID, Room string }

// NotebookRooms names n notebooks of an events test, each with its own file id and room.
func NotebookRooms(n int) []NotebookRoom {
	out := make([]NotebookRoom, n)
	for i := range out {
		id := fmt.Sprintf("7e57%04d-0000-4000-8000-%012d", i, i)
		out[i] = NotebookRoom{Path: fmt.Sprintf("team/nb-%03d.ipynb", i), FileID: id, Room: ".notebook:" + id + ".y"}
	}
	return out
}

// Received is one event as it reached a consumer.
type Received struct {
	Ev  publish.Event
	At  time.Time
	Raw []byte
	URI []string // what the Python receiver would publish (webhook only)
}

// Consumer is where a publisher's events arrive: the example Python receiver or a
// LISTENing Postgres client.
type Consumer struct {
	Publisher string // the sidecar's publisher config block
	Events    chan Received
}

// StartReceiver runs examples/webhook-receiver/receiver.py with bindings, and collects
// the events it prints.
func StartReceiver(t testing.TB, bind ...string) Consumer {
	t.Helper()
	args := []string{filepath.Join(RepoRoot, "examples", "webhook-receiver", "receiver.py"), "--port", "0", "--token", "hook-token"}
	for _, b := range bind {
		args = append(args, "--bind", b)
	}
	receiver := testenv.StartChild(t, exec.Command("python3", args...), testenv.AnyExit)
	t.Cleanup(func() { _ = receiver.Interrupt() })
	sc := bufio.NewScanner(receiver.Out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	if !sc.Scan() {
		t.Fatalf("receiver printed nothing: %v", sc.Err())
	}
	var hello struct{ Listening string }
	if err := json.Unmarshal(sc.Bytes(), &hello); err != nil || hello.Listening == "" {
		t.Fatalf("receiver's first line %q: %v", sc.Text(), err)
	}
	c := Consumer{
		Publisher: fmt.Sprintf(`{name: webhook, options: {url: %q, backoff: 20ms, headers: {Authorization: "Bearer hook-token"}}}`, hello.Listening+"/events"),
		Events:    make(chan Received, 4096),
	}
	go func() {
		for sc.Scan() {
			var line struct {
				Event   json.RawMessage
				Publish []string
				Note    string
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Errorf("receiver line %q: %v", sc.Text(), err)
				continue
			}
			if line.Note != "" {
				t.Logf("receiver: %s", line.Note)
			}
			c.Events <- Received{At: time.Now(), Raw: line.Event, URI: line.Publish}
		}
		close(c.Events)
	}()
	return c
}

// Next returns the next event, validated against the schema, within d.
func (c Consumer) Next(t testing.TB, d time.Duration) Received {
	t.Helper()
	select {
	case r, ok := <-c.Events:
		if !ok {
			t.Fatal("the consumer stopped")
		}
		if r.URI == nil && len(r.Raw) > publishers.MaxNotifyPayload {
			t.Fatalf("NOTIFY payload of %d bytes, over %d", len(r.Raw), publishers.MaxNotifyPayload)
		}
		publishtest.Validate(t, r.Raw, &r.Ev)
		return r
	case <-time.After(d):
		t.Fatalf("no event within %v", d)
	}
	panic("unreachable")
}

// Quiet fails the test if an event arrives within d.
func (c Consumer) Quiet(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case r := <-c.Events:
		t.Fatalf("unexpected event %s", r.Raw)
	case <-time.After(d):
	}
}

// StartEventsSidecarIn is startEventsSidecar in dir, calling beforeLaunch (if not nil)
// once the store is written, before the binary starts.
func StartEventsSidecarIn(t testing.TB, dir string, c Consumer, nbs []NotebookRoom, fx EventFixture, beforeLaunch func(), preload ...string) (*Sidecar, Writer) {
	t.Helper()
	fileidDB := filepath.Join(dir, "file_id_manager.db")
	ExecSQL(t, fileidDB, fileid.Schema)
	for _, nb := range nbs {
		ExecSQL(t, fileidDB, `INSERT INTO Files(id, path) VALUES (?, ?)`, nb.FileID, filepath.Join(dir, nb.Path))
	}
	store := filepath.Join(dir, ".jupyter_ystore.db")
	w := StartWriter(t, store)
	for _, nb := range nbs {
		w.WriteRoom(nb.Room, fx.Initial)
		for _, name := range preload {
			w.WriteRoom(nb.Room, fx.Edits[name])
		}
	}
	if beforeLaunch != nil {
		beforeLaunch()
	}
	sc := Launch(t, dir, fmt.Sprintf(`store:
  backend: sqlite
  sqlite: {path: %q, poll_interval: 500ms}
fileid: {db_path: %q, root_dir: %q}
notifications: {debounce: 250ms, max_delay: 2s}
publisher: %s
`, store, fileidDB, dir, c.Publisher), "serve")
	return sc, w
}

// WriteRoom stores one update in room and returns the row's timestamp and commit time.
func (w Writer) WriteRoom(room string, update []byte) (ts, committed time.Time) {
	r := w.Send(map[string]any{"op": "write", "room": room, "update": base64.StdEncoding.EncodeToString(update)})
	return time.UnixMicro(int64(math.Round(r.TS * 1e6))), UnixTime(r.Committed)
}

// Burst writes updates to room in one request to the writer and returns the last row's
// timestamp and commit time.
func (w Writer) Burst(room string, updates ...[]byte) (ts, committed time.Time) {
	enc := make([]string, len(updates))
	for i, u := range updates {
		enc[i] = base64.StdEncoding.EncodeToString(u)
	}
	r := w.Send(map[string]any{"op": "flood", "room": room, "updates": enc})
	if len(r.Rows) != len(updates) {
		w.t.Fatalf("burst of %d updates wrote %d rows", len(updates), len(r.Rows))
	}
	last := r.Rows[len(r.Rows)-1] // rowid, ts, committed
	return time.UnixMicro(int64(math.Round(last[1] * 1e6))), UnixTime(last[2])
}
