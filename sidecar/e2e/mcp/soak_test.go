package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite/sqlitetest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

const (
	soakNotebooks = 4
	// soakWindow is how long after a commit a 2026-07-28 listen stream must have stayed
	// open for the change to be owed to it: the 2 s debounce ceiling plus delivery.
	soakWindow = 3 * time.Second
	// soakSettle is the quiet time after the writer's last commit before the clients
	// stop: a 2025-11-25 stream may be down 3 s, then replays.
	soakSettle = 8 * time.Second
	// soakRecovery is how long after a fault ends /readyz may still answer 503.
	soakRecovery = 5 * time.Second
)

// soakRoom is one notebook the writer edits: its room, the next session step to write
// and the document the store holds (for squashes, checkpoints and re-seeding).
type soakRoom struct {
	name, uri, key, path string
	next                 int
	doc                  *yjs.Doc
	lastTS               float64 // timestamp of the room's last row
}

// soakCommit is a visible change committed by the writer.
type soakCommit struct {
	room int
	at   time.Time
}

// soakRun is the writer's side of the soak, driven from the test goroutine.
type soakRun struct {
	t       *testing.T
	w       sidecartest.Writer
	steps   []sidecartest.Step
	store   string
	rooms   []*soakRoom
	commits []soakCommit
	faults  []fault
	writes  int
	events  []string
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// apply records that the room's next step was committed by r.
func (s *soakRun) apply(ri int, r sqlitetest.Reply) {
	room := s.rooms[ri]
	st := s.steps[room.next]
	if _, err := room.doc.ApplyUpdate(st.Update); err != nil {
		s.t.Fatal(err)
	}
	room.next++
	room.lastTS = r.TS
	s.writes++
	if !st.Changes.Empty() {
		s.commits = append(s.commits, soakCommit{ri, sidecartest.UnixTime(r.Committed)})
	}
}

// burst writes the room's steps up to and including its next visible one, then up to
// two more, one transaction each. It reports false when the session is used up.
func (s *soakRun) burst(ri int) bool {
	room := s.rooms[ri]
	extra := -1
	for room.next < len(s.steps) && extra != 0 {
		visible := !s.steps[room.next].Changes.Empty()
		r := s.w.Send(map[string]any{"op": "write", "room": room.key, "update": b64(s.steps[room.next].Update)})
		s.apply(ri, r)
		switch {
		case extra > 0:
			extra--
		case visible:
			extra = rand.IntN(3)
		}
	}
	return room.next < len(s.steps)
}

// state is the room's whole document as one update.
func (s *soakRun) state(ri int) string {
	b, err := s.rooms[ri].doc.EncodeStateAsUpdate(nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return b64(b)
}

func (s *soakRun) logf(format string, args ...any) {
	msg := time.Now().Format("15:04:05.000 ") + fmt.Sprintf(format, args...)
	s.events = append(s.events, msg)
	s.t.Log(msg)
}

// checkpoint stores the room's checkpoint with its next update, as Jupyter does.
func (s *soakRun) checkpoint(ri int) {
	room := s.rooms[ri]
	r := s.w.Send(map[string]any{"op": "checkpoint", "room": room.key, "state": s.state(ri), "update": b64(s.steps[room.next].Update)})
	s.apply(ri, r)
	s.logf("checkpoint %s", room.name)
}

// squash replaces the room's rows by one merged row, with its next update.
func (s *soakRun) squash(ri int) {
	room := s.rooms[ri]
	r := s.w.Send(map[string]any{"op": "squash", "room": room.key, "merged": s.state(ri), "cutoff": room.lastTS, "update": b64(s.steps[room.next].Update)})
	s.apply(ri, r)
	s.logf("squash %s: %d rows merged", room.name, r.Deleted)
}

// degrade stores an undecodable row in a room of its own, holds it, then squashes it
// away.
func (s *soakRun) degrade(hold time.Duration) {
	const bad = ".notebook:9d1c7a52-0000-4000-8000-000000000bad.y"
	good := b64(s.steps[0].Update)
	s.w.Send(map[string]any{"op": "write", "room": bad, "update": good})
	r := s.w.Send(map[string]any{"op": "write", "room": bad, "update": b64([]byte{1, 1, 0xff, 0xff, 0xff})})
	f := fault{name: "room degraded", start: sidecartest.UnixTime(r.Committed)}
	s.logf("room degraded")
	s.live(hold)
	h := s.w.Send(map[string]any{"op": "squash", "room": bad, "merged": good, "cutoff": r.TS})
	f.end = sidecartest.UnixTime(h.Committed)
	s.faults = append(s.faults, f)
	s.logf("degraded room squashed")
}

// damage changes the store file outside SQLite while the writer pauses, holds it, and
// copies the good file back in place.
func (s *soakRun) damage(name string, hold time.Duration, bad func(good []byte)) {
	good, err := os.ReadFile(s.store)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := os.Stat(s.store + "-journal"); err == nil {
		s.t.Fatal("the store has a journal while the writer is idle")
	}
	time.Sleep(20 * time.Millisecond) // not in the clock tick of the last write: elapsing time, not a wait
	f := fault{name: name, start: time.Now()}
	bad(good)
	s.logf("store %s (writer paused)", name)
	time.Sleep(hold) // the fault lasts a while: a stimulus, not a wait
	sqlitetest.WriteInPlace(s.t, s.store, good)
	f.end = time.Now()
	s.faults = append(s.faults, f)
	s.logf("store restored in place")
}

// replace moves the store aside and starts a fresh one, as pycrdt-store does on a
// schema version mismatch, and writes each room's whole document into it.
func (s *soakRun) replace() {
	f := fault{name: "store replaced", start: time.Now(), optional: true}
	s.w.Send(map[string]any{"op": "rename"}) // the fresh file has its schema when this returns
	f.end = time.Now()
	s.faults = append(s.faults, f)
	for ri, room := range s.rooms {
		r := s.w.Send(map[string]any{"op": "write", "room": room.key, "update": s.state(ri)})
		room.lastTS = r.TS
		s.writes++
	}
	s.logf("store replaced by a fresh file, rooms re-seeded")
}

// live keeps the writer editing for d.
func (s *soakRun) live(d time.Duration) {
	end := time.Now().Add(d)
	for ri := 0; time.Now().Before(end); ri = (ri + 1) % len(s.rooms) {
		if !s.burst(ri) {
			s.logf("%s: session used up", s.rooms[ri].name)
		}
		time.Sleep(time.Duration(200+rand.IntN(300)) * time.Millisecond) // the pace of the edits
	}
}

// TestFaultSoak runs the real binary for SOAK_DURATION (default 10m) under a live
// pycrdt-like writer editing four notebooks, 200 mcp-go sessions of both eras dropping
// and resuming their streams at random, and a schedule of store faults: checkpoints,
// squashes, a degraded room healed, the file truncated and overwritten with garbage and
// each time restored in place, the file replaced. It reports, per client, the changes
// owed and announced, /readyz against the faults, and the process's peak memory and
// descriptors; any lost change, wrong /readyz answer or failed write fails it.
//
//	SOAK=1 go test ./sidecar/e2e -run TestFaultSoak -timeout 30m -v
func TestFaultSoak(t *testing.T) {
	if os.Getenv("SOAK") != "1" {
		t.Skip("set SOAK=1 to run the fault soak (SOAK_DURATION, default 10m; SOAK_SESSIONS, default 200)")
	}
	if sidecartest.RaceBuild {
		t.Log("the binary under test is a -race build: its memory and timing are not the release's")
	}
	duration, sessions := 10*time.Minute, 200
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		duration = d
	}
	if v := os.Getenv("SOAK_SESSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		sessions = n
	}

	dir := t.TempDir()
	s := &soakRun{t: t, steps: sidecartest.Session(t), store: filepath.Join(dir, ".jupyter_ystore.db")}
	s.w = sidecartest.StartWriter(t, s.store)
	fileidDB := filepath.Join(dir, "file_id_manager.db")
	sidecartest.ExecSQL(t, fileidDB, fileid.Schema)
	var names []string
	for i := range soakNotebooks {
		id := fmt.Sprintf("0b5e2f5c-6a57-4d55-9d4c-1f6f0c3b8a%02d", i)
		room := &soakRoom{name: fmt.Sprintf("nb%d", i), key: ".notebook:" + id + ".y", path: fmt.Sprintf("work/nb%d.ipynb", i), doc: yjs.NewDoc()}
		room.uri = "notebook://" + room.name
		s.rooms = append(s.rooms, room)
		sidecartest.ExecSQL(t, fileidDB, `INSERT INTO Files(id, path) VALUES (?, ?)`, id, filepath.Join(dir, room.path))
		names = append(names, fmt.Sprintf("%s: %s", room.name, room.path))
		for range sidecartest.Preloaded {
			s.apply(i, s.w.Send(map[string]any{"op": "write", "room": room.key, "update": b64(s.steps[room.next].Update)}))
		}
	}
	s.commits, s.writes = nil, 0
	sc := sidecartest.Launch(t, dir, fmt.Sprintf(`store:
  backend: sqlite
  sqlite: {path: %q, poll_interval: 500ms}
fileid: {db_path: %q, root_dir: %q}
notifications: {debounce: 250ms, max_delay: 2s}
notebooks: {%s}
`, s.store, fileidDB, dir, strings.Join(names, ", ")), "serve")
	sc.WaitHTTP("/readyz", http.StatusOK)

	// The sessions: even ids 2025-11-25, odd 2026-07-28, each on two random notebooks.
	clients := make([]*soakClient, sessions)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var dialErrs []error
	var mu sync.Mutex
	for i := range clients {
		perm := rand.Perm(soakNotebooks)
		uris := []string{s.rooms[perm[0]].uri, s.rooms[perm[1]].uri}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := dialSoak(t, sc.MCPURL(), i, i%2 == 1, uris)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				dialErrs = append(dialErrs, err)
				return
			}
			clients[i] = c
		}()
	}
	wg.Wait()
	if len(dialErrs) > 0 {
		t.Fatalf("%d sessions could not start: %v", len(dialErrs), dialErrs[0])
	}
	ctx, stopClients := context.WithCancel(context.Background())
	var running sync.WaitGroup
	for _, c := range clients {
		running.Add(1)
		go func() {
			defer running.Done()
			c.run(ctx)
		}()
	}
	testenv.Eventually(t, testenv.Wait, "every client's first stream open", func() bool {
		return !slices.ContainsFunc(clients, func(c *soakClient) bool { return !c.streaming() })
	}, func() string {
		var down []string
		for _, c := range clients {
			if !c.streaming() {
				c.mu.Lock()
				down = append(down, fmt.Sprintf("client %d (%s): errors %v", c.id, c.era(), c.errs))
				c.mu.Unlock()
			}
		}
		return strings.Join(down, "; ")
	})
	watchCtx, stopWatch := context.WithCancel(context.Background())
	readies := pollReady(watchCtx, sc.URL, 100*time.Millisecond)
	usage := watchProc(watchCtx, sc.Cmd.Process.Pid, sc.URL, time.Second)

	// The schedule: faults at fixed fractions of the run, the writer editing between.
	start := time.Now()
	at := func(f float64) time.Duration { return time.Duration(f * float64(duration)) }
	schedule := []struct {
		at time.Duration
		do func()
	}{
		{at(0.08), func() { s.checkpoint(0) }},
		{at(0.16), func() { s.squash(1) }},
		{at(0.25), func() { s.degrade(5 * time.Second) }},
		{at(0.36), func() {
			s.damage("truncated to 0 bytes", 4*time.Second, func([]byte) {
				if err := os.Truncate(s.store, 0); err != nil {
					t.Fatal(err)
				}
			})
		}},
		{at(0.47), s.replace},
		{at(0.58), func() {
			s.damage("overwritten with garbage after page 1", 4*time.Second, func(good []byte) {
				sqlitetest.WriteInPlace(t, s.store, append(good[:4096:4096], bytes.Repeat([]byte{0xa5}, len(good)-4096)...))
			})
		}},
		{at(0.68), func() { s.checkpoint(2); s.squash(3) }},
		{at(0.80), func() { s.squash(0); s.checkpoint(1) }},
		{at(0.90), func() { s.squash(2); s.squash(3) }},
	}
	for _, f := range schedule {
		s.live(time.Until(start.Add(f.at)))
		f.do()
	}
	s.live(time.Until(start.Add(duration)))
	lastCommit := time.Now()
	s.logf("writer stops: %d transactions, %d visible changes", s.writes, len(s.commits))
	// The clients keep running soakSettle past the last commit. No barrier says that
	// every owed change has arrived: what a 2026-07-28 client is owed is known only once
	// its streams have stopped. A bounded window, longer than a stream's longest outage
	// (3 s) and the debounce ceiling.
	time.Sleep(soakSettle)
	stopClients()
	running.Wait()
	stopWatch()
	samples, proc := readies(), usage()

	// What the sidecar serves at the end is what Yjs computes from the store.
	reader := clients[1]
	for ri, room := range s.rooms {
		want := sidecartest.MustJSON(t, s.steps[room.next-1].After)
		req := mcp.ReadResourceRequest{}
		req.Params.URI = room.uri
		res, err := reader.c.ReadResource(sidecartest.WaitCtx(t, testenv.Wait), req)
		if err != nil {
			t.Errorf("read %s: %v", room.uri, err)
			continue
		}
		if tc, ok := res.Contents[0].(mcp.TextResourceContents); !ok || !sidecartest.JSONSame(tc.Text, want) {
			t.Errorf("%s at the end differs from Yjs's notebook of the store (room %d, step %d)", room.uri, ri, room.next)
		}
	}
	metrics := map[string]float64{}
	for _, m := range []string{"notifications_sent_total", "notifications_dropped_total", "undeliverable_ended_total",
		"streams_resumed_total", "streams_resume_refused_total", "limit_refusals_total", "sessions"} {
		metrics[m] = sc.Metric("jupyter_mcp_sidecar_mcp_" + m)
	}
	metrics["http_connections_refused_total"] = sc.Metric("jupyter_mcp_sidecar_http_connections_refused_total")
	for _, c := range clients {
		c.close()
	}

	s.report(clients, samples, proc, metrics, time.Since(start), lastCommit.Sub(start))
}

// eraTally sums the delivery of one era's clients.
type eraTally struct {
	clients, owed, announced, lost, gap, gapCovered, foreign, errs int
	drops, resumes                                                 int64
	delays                                                         []time.Duration
	minOwed, maxOwed                                               int
}

func (s *soakRun) report(clients []*soakClient, samples []readySample, proc procUsage, metrics map[string]float64, ran, writing time.Duration) {
	t := s.t
	byURI := map[string]int{}
	for i, r := range s.rooms {
		byURI[r.uri] = i
	}
	tallies := map[string]*eraTally{}
	for _, c := range clients {
		c.settle()
		e := tallies[c.era()]
		if e == nil {
			e = &eraTally{minOwed: 1 << 30}
			tallies[c.era()] = e
		}
		owed, lost := 0, 0
		for _, uri := range c.uris {
			for _, cm := range s.commits {
				if cm.room != byURI[uri] {
					continue
				}
				delay, ok := c.coveredAfter(uri, cm.at)
				if !c.expects(cm.at, soakWindow) {
					e.gap++
					if ok {
						e.gapCovered++
					}
					continue
				}
				owed++
				if ok {
					e.delays = append(e.delays, delay)
				} else {
					lost++
				}
			}
		}
		e.clients++
		e.owed += owed
		e.announced += owed - lost
		e.lost += lost
		e.minOwed, e.maxOwed = min(e.minOwed, owed), max(e.maxOwed, owed)
		e.foreign += len(c.foreign)
		e.errs += len(c.errs)
		e.drops += c.drops.Load()
		e.resumes += c.resumes.Load()
		if lost > 0 || len(c.errs) > 0 || len(c.foreign) > 0 {
			t.Errorf("client %d (%s, %v): owed %d, lost %d, foreign %v, errors %v", c.id, c.era(), c.uris, owed, lost, c.foreign, c.errs)
		}
		t.Logf("client %3d %s %v: owed %d announced %d lost %d, %d drops", c.id, c.era(), c.uris, owed, owed-lost, lost, c.drops.Load())
	}

	t.Logf("SOAK ran %v (writer %v): %d transactions, %d visible changes on %d notebooks, writer failures 0",
		ran.Round(time.Second), writing.Round(time.Second), s.writes, len(s.commits), len(s.rooms))
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		e := tallies[era]
		if e == nil {
			continue
		}
		slices.Sort(e.delays)
		q := func(p float64) time.Duration {
			if len(e.delays) == 0 {
				return 0
			}
			return e.delays[int(p*float64(len(e.delays)-1))].Round(time.Millisecond)
		}
		t.Logf("SOAK %s: %d clients, owed %d (per client %d–%d), announced %d, lost %d; commit → announced p50 %v p99 %v max %v; "+
			"%d stream drops, %d resumes; changes while no listen stream was open: %d (%d announced by a later stream); foreign %d, errors %d",
			era, e.clients, e.owed, e.minOwed, e.maxOwed, e.announced, e.lost, q(0.5), q(0.99), q(1),
			e.drops, e.resumes, e.gap, e.gapCovered, e.foreign, e.errs)
	}

	r := judgeReady(samples, s.faults, soakRecovery)
	t.Logf("SOAK /readyz: %d polls, %d faults (%s), longest fault → 503 %v, longest restore → 200 %v, unreported %v, 200 inside a reported fault %d, 503 while the store was replaced %d, not ready outside faults %d, failed polls %d",
		r.polls, len(s.faults), faultNames(s.faults), r.detect.Round(time.Millisecond), r.recover.Round(time.Millisecond),
		r.unreported, r.readyInside, r.optional503, len(r.notReady), r.failed)
	t.Logf("SOAK /readyz per fault: %s", strings.Join(r.perFault, "; "))
	if len(r.unreported) > 0 || r.readyInside > 0 || len(r.notReady) > 0 || r.failed > 0 {
		for i, n := range r.notReady {
			if i == 10 {
				break
			}
			t.Logf("not ready outside faults at %s: %d %s", n.at.Format("15:04:05.000"), n.code, n.body)
		}
		t.Errorf("/readyz did not follow the faults")
	}
	t.Logf("SOAK sidecar: peak RSS %.1f MB (VmHWM %.1f MB; %.1f MB with every client connected, %.1f MB at the end), peak fds %d (%d at the start, %d at the end), %d samples, %d failed",
		float64(proc.peakRSS)/1024, float64(proc.hwm)/1024, float64(proc.firstRSS)/1024, float64(proc.lastRSS)/1024, proc.peakFDs, proc.firstFDs, proc.lastFDs, proc.samples, proc.sampleErrors)
	t.Logf("SOAK sidecar RSS MB/Go heap in use MB/live heap MB/fds/goroutines each minute: %s", strings.Join(proc.perMinute, " "))
	t.Logf("SOAK metrics: %v", metrics)
	for _, e := range tallies {
		if e.lost > 0 {
			t.Errorf("%d changes owed to subscribers were never announced", e.lost)
		}
	}
}

func faultNames(fs []fault) string {
	var out []string
	for _, f := range fs {
		opt := ""
		if f.optional {
			opt = ", 503 allowed"
		}
		out = append(out, fmt.Sprintf("%s %.3fs%s", f.name, f.end.Sub(f.start).Seconds(), opt))
	}
	return strings.Join(out, "; ")
}
