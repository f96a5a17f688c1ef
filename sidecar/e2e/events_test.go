package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish/publishtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres/pgtest"
)

// eventFixture is testdata/events.json, made by testdata/mcpclient/gen-events.mjs with
// @jupyter/ydoc: a notebook (cells c1, c2) and edits, each named.
type eventFixture struct {
	initial []byte
	edits   map[string][]byte
}

func loadEventFixture(t testing.TB) eventFixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "events.json"))
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
	f := eventFixture{initial: dec(doc.Initial), edits: map[string][]byte{}}
	for _, e := range doc.Edits {
		f.edits[e.Name] = dec(e.Update)
	}
	return f
}

// notebookRoom is one notebook of an events test: its path, file id and room key.
type notebookRoom struct{ path, fileID, room string }

func notebookRooms(n int) []notebookRoom {
	out := make([]notebookRoom, n)
	for i := range out {
		id := fmt.Sprintf("7e57%04d-0000-4000-8000-%012d", i, i)
		out[i] = notebookRoom{path: fmt.Sprintf("team/nb-%03d.ipynb", i), fileID: id, room: ".notebook:" + id + ".y"}
	}
	return out
}

// received is one event as it reached a consumer.
type received struct {
	ev  publish.Event
	at  time.Time
	raw []byte
	uri []string // what the Python receiver would publish (webhook only)
}

// consumer is where a publisher's events arrive: the example Python receiver or a
// LISTENing Postgres client.
type consumer struct {
	publisher string // the sidecar's publisher config block
	events    chan received
}

// startReceiver runs examples/webhook-receiver/receiver.py with bindings, and collects
// the events it prints.
func startReceiver(t testing.TB, bind ...string) consumer {
	t.Helper()
	args := []string{filepath.Join(repoRoot, "examples", "webhook-receiver", "receiver.py"), "--port", "0", "--token", "hook-token"}
	for _, b := range bind {
		args = append(args, "--bind", b)
	}
	cmd := exec.Command("python3", args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderrLog{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	if !sc.Scan() {
		t.Fatalf("receiver printed nothing: %v", sc.Err())
	}
	var hello struct{ Listening string }
	if err := json.Unmarshal(sc.Bytes(), &hello); err != nil || hello.Listening == "" {
		t.Fatalf("receiver's first line %q: %v", sc.Text(), err)
	}
	c := consumer{
		publisher: fmt.Sprintf(`{name: webhook, options: {url: %q, backoff: 20ms, headers: {Authorization: "Bearer hook-token"}}}`, hello.Listening+"/events"),
		events:    make(chan received, 4096),
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
			c.events <- received{at: time.Now(), raw: line.Event, uri: line.Publish}
		}
		close(c.events)
	}()
	return c
}

// stderrLog sends a helper process's stderr to the test log.
type stderrLog struct{ t testing.TB }

func (w stderrLog) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimSpace(string(p)))
	return len(p), nil
}

// startListener LISTENs on a fresh channel of the test PostgreSQL.
func startListener(t testing.TB) consumer {
	t.Helper()
	dsn := pgtest.DSN(t)
	channel := pgtest.Schema("events_")
	ctx, cancel := context.WithCancel(context.Background())
	l := publishtest.Listen(t, ctx, dsn, channel)
	c := consumer{
		publisher: fmt.Sprintf(`{name: pgnotify, options: {dsn: %q, channel: %s, backoff: 20ms}}`, dsn, channel),
		events:    make(chan received, 4096),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(c.events)
		for {
			payload, err := l.Next(ctx)
			if err != nil {
				return
			}
			c.events <- received{at: time.Now(), raw: payload}
		}
	}()
	// Before the connection closes (cleanups run last first).
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// next returns the next event, validated against the schema, within d.
func (c consumer) next(t testing.TB, d time.Duration) received {
	t.Helper()
	select {
	case r, ok := <-c.events:
		if !ok {
			t.Fatal("the consumer stopped")
		}
		if r.uri == nil && len(r.raw) > publish.MaxNotifyPayload {
			t.Fatalf("NOTIFY payload of %d bytes, over %d", len(r.raw), publish.MaxNotifyPayload)
		}
		publishtest.Validate(t, r.raw, &r.ev)
		return r
	case <-time.After(d):
		t.Fatalf("no event within %v", d)
	}
	panic("unreachable")
}

// quiet fails the test if an event arrives within d.
func (c consumer) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case r := <-c.events:
		t.Fatalf("unexpected event %s", r.raw)
	case <-time.After(d):
	}
}

// startEventsSidecar starts the binary on a store holding the notebooks' initial
// states and then the preloaded edits, with no name bound, publishing through c.
func startEventsSidecar(t testing.TB, c consumer, nbs []notebookRoom, fx eventFixture, preload ...string) (*sidecar, writer) {
	t.Helper()
	return startEventsSidecarIn(t, t.TempDir(), c, nbs, fx, nil, preload...)
}

// startEventsSidecarIn is startEventsSidecar in dir, calling beforeLaunch (if not nil)
// once the store is written, before the binary starts.
func startEventsSidecarIn(t testing.TB, dir string, c consumer, nbs []notebookRoom, fx eventFixture, beforeLaunch func(), preload ...string) (*sidecar, writer) {
	t.Helper()
	fileidDB := filepath.Join(dir, "file_id_manager.db")
	execSQL(t, fileidDB, fileid.Schema)
	for _, nb := range nbs {
		execSQL(t, fileidDB, `INSERT INTO Files(id, path) VALUES (?, ?)`, nb.fileID, filepath.Join(dir, nb.path))
	}
	store := filepath.Join(dir, ".jupyter_ystore.db")
	w := startWriter(t, store)
	for _, nb := range nbs {
		w.writeRoom(nb.room, fx.initial)
		for _, name := range preload {
			w.writeRoom(nb.room, fx.edits[name])
		}
	}
	if beforeLaunch != nil {
		beforeLaunch()
	}
	sc := launch(t, dir, fmt.Sprintf(`store:
  backend: sqlite
  sqlite: {path: %q, poll_interval: 500ms}
fileid: {db_path: %q, root_dir: %q}
notifications: {debounce: 250ms, max_delay: 2s}
publisher: %s
`, store, fileidDB, dir, c.publisher), "serve")
	return sc, w
}

// writeRoom stores one update in room and returns the row's timestamp and commit time.
func (w writer) writeRoom(room string, update []byte) (ts, committed time.Time) {
	r := w.do(map[string]any{"op": "write", "room": room, "update": base64.StdEncoding.EncodeToString(update)})
	return time.UnixMicro(int64(math.Round(r.TS * 1e6))), unixTime(r.Committed)
}

// burst writes updates to room in one request to the writer and returns the last row's
// timestamp and commit time.
func (w writer) burst(room string, updates ...[]byte) (ts, committed time.Time) {
	enc := make([]string, len(updates))
	for i, u := range updates {
		enc[i] = base64.StdEncoding.EncodeToString(u)
	}
	r := w.do(map[string]any{"op": "flood", "room": room, "updates": enc})
	if len(r.Rows) != len(updates) {
		w.t.Fatalf("burst of %d updates wrote %d rows", len(updates), len(r.Rows))
	}
	last := r.Rows[len(r.Rows)-1] // rowid, ts, committed
	return time.UnixMicro(int64(math.Round(last[1] * 1e6))), unixTime(last[2])
}

// TestEventsReachConsumers: with no name bound, edits to two notebooks reach the
// example Python webhook receiver, and a LISTENing Postgres client, as schema-valid
// events with the right path, file id, room, commit time and changed cells, within
// the debounce window.
func TestEventsReachConsumers(t *testing.T) {
	fx := loadEventFixture(t)
	for _, tc := range []struct {
		name  string
		start func(testing.TB) consumer
	}{
		{"webhook", func(t testing.TB) consumer { return startReceiver(t, "work=team/nb-001.ipynb") }},
		{"pgnotify", startListener},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.start(t)
			nbs := notebookRooms(2)
			a, b := nbs[0], nbs[1]
			sc, w := startEventsSidecar(t, c, nbs, fx)
			// Loading the store: each notebook appears with its cells.
			load := map[string]publish.Event{}
			for range nbs {
				r := c.next(t, testenv.Wait)
				load[r.ev.Path] = r.ev
			}
			for _, nb := range nbs {
				ev := load[nb.path]
				if ev.FileID != nb.fileID || ev.Room != nb.room || ev.Seq != 1 || len(ev.URIs) != 0 ||
					!slices.Equal(ev.Changes.Added, []string{"c1", "c2"}) {
					t.Fatalf("load event of %s = %+v", nb.path, ev)
				}
			}

			// a: c1's source. b, in one burst: c1's source and outputs, and cell e0 added.
			tsA, _ := w.writeRoom(a.room, fx.edits["source-c1"])
			// b's burst is written in one request, so a busy machine cannot stretch it
			// over two debounce windows.
			tsB, committed := w.burst(b.room, fx.edits["source-c1"], fx.edits["output-c1-0"], fx.edits["add-e0"])
			got := map[string]received{}
			for range 2 {
				r := c.next(t, delivery)
				got[r.ev.Path] = r
				t.Logf("%s: event for %s %v after the last commit", tc.name, r.ev.Path, r.at.Sub(committed).Round(time.Millisecond))
				if lat := r.at.Sub(committed); lat > delivery {
					t.Errorf("event for %s %v after the commit, over %v", r.ev.Path, lat, delivery)
				}
			}
			ea, eb := got[a.path].ev, got[b.path].ev
			if ea.FileID != a.fileID || ea.Room != a.room || ea.Seq != 2 || !ea.Time.Equal(tsA) || len(ea.URIs) != 0 ||
				len(ea.Changes.Added)+len(ea.Changes.Removed)+len(ea.Changes.Moved) != 0 ||
				!slices.Equal(slices.Sorted(maps.Keys(ea.Changes.Cells)), []string{"c1"}) ||
				!slices.Equal(ea.Changes.Cells["c1"].Parts, []string{publish.PartSource}) {
				t.Errorf("event of %s = %+v (row at %v)", a.path, ea, tsA)
			}
			c1 := eb.Changes.Cells["c1"]
			if eb.FileID != b.fileID || eb.Room != b.room || eb.Seq != 2 || !eb.Time.Equal(tsB) || len(eb.URIs) != 0 ||
				!slices.Equal(eb.Changes.Added, []string{"e0"}) ||
				!slices.Equal(c1.Parts, []string{publish.PartSource, publish.PartOutputs}) || len(c1.OutputIndexes) == 0 {
				t.Fatalf("event of %s = %+v (row at %v)", b.path, eb, tsB)
			}
			if tc.name == "webhook" {
				// The receiver maps b's path to the name its session bound.
				pub := got[b.path].uri
				for _, want := range []string{"notebook://work", "notebook://work/cells/c1", "notebook://work/cells/e0",
					fmt.Sprintf("notebook://work/cells/c1/outputs/%d", c1.OutputIndexes[0])} {
					if !slices.Contains(pub, want) {
						t.Errorf("receiver publishes %v for %s, without %s", pub, b.path, want)
					}
				}
				if len(got[a.path].uri) != 0 {
					t.Errorf("receiver publishes %v for unbound %s", got[a.path].uri, a.path)
				}
			}
			// Nothing more arrives: the barrier is one more edit of a, whose event must be
			// the next one, and the last the publisher delivered (two loads, two edits, it).
			w.writeRoom(a.room, fx.edits["output-c1-0"])
			if r := c.next(t, testenv.Wait); r.ev.Path != a.path || r.ev.Seq != 3 {
				t.Fatalf("unexpected event %s", r.raw)
			}
			const delivered = "jupyter_mcp_sidecar_publisher_delivered_total"
			testenv.Eventually(t, testenv.Wait, "5 events delivered", func() bool { return sc.metric(delivered) == 5 },
				func() string { return fmt.Sprintf("%v delivered", sc.metric(delivered)) })
		})
	}
}

// TestEventsAtScale: 1,000 debounced changes across 100 notebooks (ten rounds of one
// edit per notebook, each round once the previous one's events arrived; the last round
// adds 200 cells per notebook, an event larger than a NOTIFY payload): no event lost,
// each notebook's in commit order, no NOTIFY payload over the limit.
// EVENTS_BENCH=1 also runs it through the webhook and prints the numbers for
// docs/BENCHMARKS.md.
func TestEventsAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	fx := loadEventFixture(t)
	// Yjs updates apply in order: source-c1, output-c1-0 and add-e0 are preloaded.
	rounds := []string{"add-e1", "add-e2", "add-e3", "add-e4", "add-e5", "add-e6", "add-e7", "add-e8", "add-e9", "add-bulk"}
	for _, tc := range []struct {
		name  string
		start func(testing.TB) consumer
	}{
		{"webhook", func(t testing.TB) consumer { return startReceiver(t) }},
		{"pgnotify", startListener},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "webhook" && os.Getenv("EVENTS_BENCH") == "" {
				// The suite keeps to its time budget with the pgnotify run, which also
				// checks the payload limit; the webhook's order and retries have unit tests.
				t.Skip("the webhook at scale runs with EVENTS_BENCH=1")
			}
			const notebooks = 100
			c := tc.start(t)
			nbs := notebookRooms(notebooks)
			_, w := startEventsSidecar(t, c, nbs, fx, "source-c1", "output-c1-0", "add-e0")
			for range nbs {
				if r := c.next(t, testenv.Wait); r.ev.Seq != 1 || r.ev.Part != nil {
					t.Fatalf("load event %+v", r.ev)
				}
			}
			type whole struct {
				ev    publish.Event
				parts int
			}
			byPath := map[string][]*whole{} // the events of each path after the load, in arrival order
			var lat []time.Duration
			maxPayload, notifications := 0, 0
			start := time.Now()
			for _, edit := range rounds {
				committed := map[string]time.Time{}
				for _, nb := range nbs {
					_, committed[nb.path] = w.writeRoom(nb.room, fx.edits[edit])
				}
				for done := 0; done < notebooks; {
					r := c.next(t, testenv.Wait)
					notifications++
					maxPayload = max(maxPayload, len(r.raw))
					evs := byPath[r.ev.Path]
					if r.ev.Part != nil && r.ev.Part.Index > 0 {
						// A further part: same event, more of its change.
						last := evs[len(evs)-1]
						if last.ev.Seq != r.ev.Seq || last.parts != r.ev.Part.Index {
							t.Fatalf("%s: part %d of #%d after part %d of #%d", r.ev.Path, r.ev.Part.Index, r.ev.Seq, last.parts-1, last.ev.Seq)
						}
						last.ev.Changes.Added = append(last.ev.Changes.Added, r.ev.Changes.Added...)
						last.parts++
					} else {
						evs = append(evs, &whole{ev: r.ev, parts: 1})
						byPath[r.ev.Path] = evs
					}
					if last := evs[len(evs)-1]; last.ev.Part == nil || last.parts == last.ev.Part.Count {
						done++
						lat = append(lat, r.at.Sub(committed[r.ev.Path]))
					}
				}
			}
			elapsed := time.Since(start)
			// Nothing more arrives, watched for a bounded window: the session has no edit
			// left to make a barrier of.
			c.quiet(t, 700*time.Millisecond)
			lost, split := 0, 0
			for _, nb := range nbs {
				evs := byPath[nb.path]
				lost += len(rounds) - len(evs)
				for i, e := range evs {
					var want []string
					if rounds[i] == "add-bulk" {
						// In document order: inserted in one transaction at the same
						// index, YNotebook's list being updated only after it.
						for j := 199; j >= 0; j-- {
							want = append(want, fmt.Sprintf("bulk-%03d-%s", j, strings.Repeat("b", 32)))
						}
					} else {
						want = []string{strings.TrimPrefix(rounds[i], "add-")}
					}
					if e.parts > 1 {
						split++
					}
					if e.ev.Seq != uint64(i+2) || !slices.Equal(e.ev.Changes.Added, want) || e.ev.FileID != nb.fileID {
						t.Fatalf("%s event %d: seq %d, added %d cells %.60v; want seq %d, %d cells", nb.path, i, e.ev.Seq, len(e.ev.Changes.Added), e.ev.Changes.Added, i+2, len(want))
					}
				}
			}
			if lost != 0 {
				t.Fatalf("%d events lost", lost)
			}
			if tc.name == "pgnotify" && split != notebooks {
				t.Fatalf("%d events split into parts, want the %d bulk ones", split, notebooks)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Millisecond) }
			msg := fmt.Sprintf("%s: %d debounced changes across %d notebooks in %v, %d deliveries (%d events split): 0 lost, order kept per notebook; "+
				"last commit→event p50 %v p99 %v max %v; largest body/payload %d bytes (NOTIFY limit %d)",
				tc.name, len(lat), notebooks, elapsed.Round(time.Millisecond), notifications, split, q(0.5), q(0.99), q(1), maxPayload, publish.MaxNotifyPayload)
			t.Log(msg)
			if os.Getenv("EVENTS_BENCH") != "" {
				fmt.Println("EVENTS_BENCH " + msg)
			}
		})
	}
}

// TestEventsInHubMode: in hub mode each user's tenant publishes its notebooks' events
// with the user's name, from the tenant's load (the user's first request) on.
func TestEventsInHubMode(t *testing.T) {
	fx := loadEventFixture(t)
	root := t.TempDir()
	hub := jhubtest.Start(t, "http://"+testenv.FreeAddr(t))
	home := filepath.Join(root, "home", "alice")
	if err := os.MkdirAll(filepath.Join(home, "team"), 0o755); err != nil {
		t.Fatal(err)
	}
	nb := notebookRooms(1)[0]
	fileidDB := filepath.Join(home, "file_id_manager.db")
	execSQL(t, fileidDB, fileid.Schema)
	execSQL(t, fileidDB, `INSERT INTO Files(id, path) VALUES (?, ?)`, nb.fileID, filepath.Join(home, nb.path))
	w := startWriter(t, filepath.Join(home, ".jupyter_ystore.db"))
	w.writeRoom(nb.room, fx.initial)
	c := startReceiver(t)
	user := filepath.Join(root, "home", "{username}")
	sc := launch(t, root, fmt.Sprintf(`hub:
  enabled: true
  api_url: %q
  service_name: %s
  stores: {sqlite_path: %q, fileid_db: %q, root_dir: %q}
  idle_timeout: 5m
  state_dir: %q
notifications: {debounce: 250ms, max_delay: 2s}
publisher: %s
`, hub.APIURL, jhubtest.ServiceName, filepath.Join(user, ".jupyter_ystore.db"), filepath.Join(user, "file_id_manager.db"),
		user, filepath.Join(root, "state"), c.publisher), "serve")
	g, err := dialGoAs(t, sc.url+"/services/mcp/mcp", true, "token "+hub.Token("alice").Value)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	if r := c.next(t, testenv.Wait); r.ev.User != "alice" || r.ev.Path != nb.path || r.ev.FileID != nb.fileID || r.ev.Seq != 1 {
		t.Fatalf("alice's load event = %+v", r.ev)
	}
	w.writeRoom(nb.room, fx.edits["source-c1"])
	if r := c.next(t, testenv.Wait); r.ev.User != "alice" || r.ev.Path != nb.path || r.ev.Seq != 2 || len(r.ev.Changes.Cells) != 1 {
		t.Fatalf("alice's edit event = %+v", r.ev)
	}
}
