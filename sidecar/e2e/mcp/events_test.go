package mcp

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish/publishtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/publishers"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres/pgtest"
)

// startListener LISTENs on a fresh channel of the test PostgreSQL.
func startListener(t testing.TB) sidecartest.Consumer {
	t.Helper()
	dsn := pgtest.DSN(t)
	channel := pgtest.Schema("events_")
	ctx, cancel := context.WithCancel(context.Background())
	l := publishtest.Listen(t, ctx, dsn, channel)
	c := sidecartest.Consumer{
		Publisher: fmt.Sprintf(`{name: pgnotify, options: {dsn: %q, channel: %s, backoff: 20ms}}`, dsn, channel),
		Events:    make(chan sidecartest.Received, 4096),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(c.Events)
		for {
			payload, err := l.Next(ctx)
			if err != nil {
				return
			}
			c.Events <- sidecartest.Received{At: time.Now(), Raw: payload}
		}
	}()
	// Before the connection closes (cleanups run last first).
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// startEventsSidecar starts the binary on a store holding the notebooks' initial
// states and then the preloaded edits, with no name bound, publishing through c.
func startEventsSidecar(t testing.TB, c sidecartest.Consumer, nbs []sidecartest.NotebookRoom, fx sidecartest.EventFixture, preload ...string) (*sidecartest.Sidecar, sidecartest.Writer) {
	t.Helper()
	return sidecartest.StartEventsSidecarIn(t, t.TempDir(), c, nbs, fx, nil, preload...)
}

// TestEventsReachConsumers: with no name bound, edits to two notebooks reach the
// example Python webhook receiver, and a LISTENing Postgres client, as schema-valid
// events with the right path, file id, room, commit time and changed cells, within
// the debounce window.
func TestEventsReachConsumers(t *testing.T) {
	fx := sidecartest.LoadEventFixture(t)
	for _, tc := range []struct {
		name  string
		start func(testing.TB) sidecartest.Consumer
	}{
		{"webhook", func(t testing.TB) sidecartest.Consumer { return sidecartest.StartReceiver(t, "work=team/nb-001.ipynb") }},
		{"pgnotify", startListener},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.start(t)
			nbs := sidecartest.NotebookRooms(2)
			a, b := nbs[0], nbs[1]
			sc, w := startEventsSidecar(t, c, nbs, fx)
			// Loading the store: each notebook appears with its cells.
			load := map[string]publish.Event{}
			for range nbs {
				r := c.Next(t, testenv.Wait)
				load[r.Ev.Path] = r.Ev
			}
			for _, nb := range nbs {
				ev := load[nb.Path]
				if ev.FileID != nb.FileID || ev.Room != nb.Room || ev.Seq != 1 || len(ev.URIs) != 0 ||
					!slices.Equal(ev.Changes.Added, []string{"c1", "c2"}) {
					t.Fatalf("load event of %s = %+v", nb.Path, ev)
				}
			}

			// a: c1's source. b, in one burst: c1's source and outputs, and cell e0 added.
			tsA, _ := w.WriteRoom(a.Room, fx.Edits["source-c1"])
			// b's burst is written in one request, so a busy machine cannot stretch it
			// over two debounce windows.
			tsB, committed := w.Burst(b.Room, fx.Edits["source-c1"], fx.Edits["output-c1-0"], fx.Edits["add-e0"])
			got := map[string]sidecartest.Received{}
			for range 2 {
				r := c.Next(t, sidecartest.Delivery)
				got[r.Ev.Path] = r
				t.Logf("%s: event for %s %v after the last commit", tc.name, r.Ev.Path, r.At.Sub(committed).Round(time.Millisecond))
				if lat := r.At.Sub(committed); lat > sidecartest.Delivery {
					t.Errorf("event for %s %v after the commit, over %v", r.Ev.Path, lat, sidecartest.Delivery)
				}
			}
			ea, eb := got[a.Path].Ev, got[b.Path].Ev
			if ea.FileID != a.FileID || ea.Room != a.Room || ea.Seq != 2 || !ea.Time.Equal(tsA) || len(ea.URIs) != 0 ||
				len(ea.Changes.Added)+len(ea.Changes.Removed)+len(ea.Changes.Moved) != 0 ||
				!slices.Equal(slices.Sorted(maps.Keys(ea.Changes.Cells)), []string{"c1"}) ||
				!slices.Equal(ea.Changes.Cells["c1"].Parts, []string{publish.PartSource}) {
				t.Errorf("event of %s = %+v (row at %v)", a.Path, ea, tsA)
			}
			c1 := eb.Changes.Cells["c1"]
			if eb.FileID != b.FileID || eb.Room != b.Room || eb.Seq != 2 || !eb.Time.Equal(tsB) || len(eb.URIs) != 0 ||
				!slices.Equal(eb.Changes.Added, []string{"e0"}) ||
				!slices.Equal(c1.Parts, []string{publish.PartSource, publish.PartOutputs}) || len(c1.OutputIndexes) == 0 {
				t.Fatalf("event of %s = %+v (row at %v)", b.Path, eb, tsB)
			}
			if tc.name == "webhook" {
				// The receiver maps b's path to the name its session bound.
				pub := got[b.Path].URI
				for _, want := range []string{"notebook://work", "notebook://work/cells/c1", "notebook://work/cells/e0",
					fmt.Sprintf("notebook://work/cells/c1/outputs/%d", c1.OutputIndexes[0])} {
					if !slices.Contains(pub, want) {
						t.Errorf("receiver publishes %v for %s, without %s", pub, b.Path, want)
					}
				}
				if len(got[a.Path].URI) != 0 {
					t.Errorf("receiver publishes %v for unbound %s", got[a.Path].URI, a.Path)
				}
			}
			// Nothing more arrives: the barrier is one more edit of a, whose event must be
			// the next one, and the last the publisher delivered (two loads, two edits, it).
			w.WriteRoom(a.Room, fx.Edits["output-c1-0"])
			if r := c.Next(t, testenv.Wait); r.Ev.Path != a.Path || r.Ev.Seq != 3 {
				t.Fatalf("unexpected event %s", r.Raw)
			}
			const delivered = "jupyter_mcp_sidecar_publisher_delivered_total"
			testenv.Eventually(t, testenv.Wait, "5 events delivered", func() bool { return sc.Metric(delivered) == 5 },
				func() string { return fmt.Sprintf("%v delivered", sc.Metric(delivered)) })
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
	fx := sidecartest.LoadEventFixture(t)
	// Yjs updates apply in order: source-c1, output-c1-0 and add-e0 are preloaded.
	rounds := []string{"add-e1", "add-e2", "add-e3", "add-e4", "add-e5", "add-e6", "add-e7", "add-e8", "add-e9", "add-bulk"}
	for _, tc := range []struct {
		name  string
		start func(testing.TB) sidecartest.Consumer
	}{
		{"webhook", func(t testing.TB) sidecartest.Consumer { return sidecartest.StartReceiver(t) }},
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
			nbs := sidecartest.NotebookRooms(notebooks)
			_, w := startEventsSidecar(t, c, nbs, fx, "source-c1", "output-c1-0", "add-e0")
			for range nbs {
				if r := c.Next(t, testenv.Wait); r.Ev.Seq != 1 || r.Ev.Part != nil {
					t.Fatalf("load event %+v", r.Ev)
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
					_, committed[nb.Path] = w.WriteRoom(nb.Room, fx.Edits[edit])
				}
				for done := 0; done < notebooks; {
					r := c.Next(t, testenv.Wait)
					notifications++
					maxPayload = max(maxPayload, len(r.Raw))
					evs := byPath[r.Ev.Path]
					if r.Ev.Part != nil && r.Ev.Part.Index > 0 {
						// A further part: same event, more of its change.
						last := evs[len(evs)-1]
						if last.ev.Seq != r.Ev.Seq || last.parts != r.Ev.Part.Index {
							t.Fatalf("%s: part %d of #%d after part %d of #%d", r.Ev.Path, r.Ev.Part.Index, r.Ev.Seq, last.parts-1, last.ev.Seq)
						}
						last.ev.Changes.Added = append(last.ev.Changes.Added, r.Ev.Changes.Added...)
						last.parts++
					} else {
						evs = append(evs, &whole{ev: r.Ev, parts: 1})
						byPath[r.Ev.Path] = evs
					}
					if last := evs[len(evs)-1]; last.ev.Part == nil || last.parts == last.ev.Part.Count {
						done++
						lat = append(lat, r.At.Sub(committed[r.Ev.Path]))
					}
				}
			}
			elapsed := time.Since(start)
			// Nothing more arrives, watched for a bounded window: the session has no edit
			// left to make a barrier of.
			c.Quiet(t, 700*time.Millisecond)
			lost, split := 0, 0
			for _, nb := range nbs {
				evs := byPath[nb.Path]
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
					if e.ev.Seq != uint64(i+2) || !slices.Equal(e.ev.Changes.Added, want) || e.ev.FileID != nb.FileID {
						t.Fatalf("%s event %d: seq %d, added %d cells %.60v; want seq %d, %d cells", nb.Path, i, e.ev.Seq, len(e.ev.Changes.Added), e.ev.Changes.Added, i+2, len(want))
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
				tc.name, len(lat), notebooks, elapsed.Round(time.Millisecond), notifications, split, q(0.5), q(0.99), q(1), maxPayload, publishers.MaxNotifyPayload)
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
	fx := sidecartest.LoadEventFixture(t)
	root := t.TempDir()
	hub := jhubtest.Start(t, "http://"+testenv.FreeAddr(t))
	home := filepath.Join(root, "home", "alice")
	if err := os.MkdirAll(filepath.Join(home, "team"), 0o755); err != nil {
		t.Fatal(err)
	}
	nb := sidecartest.NotebookRooms(1)[0]
	fileidDB := filepath.Join(home, "file_id_manager.db")
	sidecartest.ExecSQL(t, fileidDB, fileid.Schema)
	sidecartest.ExecSQL(t, fileidDB, `INSERT INTO Files(id, path) VALUES (?, ?)`, nb.FileID, filepath.Join(home, nb.Path))
	w := sidecartest.StartWriter(t, filepath.Join(home, ".jupyter_ystore.db"))
	w.WriteRoom(nb.Room, fx.Initial)
	c := sidecartest.StartReceiver(t)
	user := filepath.Join(root, "home", "{username}")
	sc := sidecartest.Launch(t, root, fmt.Sprintf(`hub:
  enabled: true
  api_url: %q
  service_name: %s
  stores: {sqlite_path: %q, fileid_db: %q, root_dir: %q}
  idle_timeout: 5m
  state_dir: %q
notifications: {debounce: 250ms, max_delay: 2s}
publisher: %s
`, hub.APIURL, jhubtest.ServiceName, filepath.Join(user, ".jupyter_ystore.db"), filepath.Join(user, "file_id_manager.db"),
		user, filepath.Join(root, "state"), c.Publisher), "serve")
	g, err := sidecartest.DialGoAs(t, sc.URL+"/services/mcp/mcp", true, "token "+hub.Token("alice").Value)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if r := c.Next(t, testenv.Wait); r.Ev.User != "alice" || r.Ev.Path != nb.Path || r.Ev.FileID != nb.FileID || r.Ev.Seq != 1 {
		t.Fatalf("alice's load event = %+v", r.Ev)
	}
	w.WriteRoom(nb.Room, fx.Edits["source-c1"])
	if r := c.Next(t, testenv.Wait); r.Ev.User != "alice" || r.Ev.Path != nb.Path || r.Ev.Seq != 2 || len(r.Ev.Changes.Cells) != 1 {
		t.Fatalf("alice's edit event = %+v", r.Ev)
	}
}
