package mcp

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// BenchmarkFanout measures store commit → client receipt of
// notifications/resources/updated through the built binary, debounce off, with 100 and
// 1,000 subscribed streams held by one lean client (fanClient): half 2025-11-25
// sessions (resources/subscribe, the GET stream), half 2026-07-28 subscriptions/listen
// streams, read as raw HTTP and SSE lines by one goroutine over epoll (one read(2) per
// ready stream, no goroutine woken per stream) with no allocation per notification, so
// that the measuring side does not limit the figure. One
// iteration is one edit, written by the pycrdt-like writer and waited for on every
// stream. It reports the p50 and p99 of the latencies, and the CPU per edit of the
// sidecar (utime+stime of /proc/PID/stat) and of this process (the client, the
// writer's driver included).
//
//	go test -run '^$' -bench Fanout -benchtime 100x -count 5 ./sidecar/e2e/mcp/
//
// FANOUT_SESSIONS (default "100,1000") sets the stream counts; FANOUT_BASELINE, the
// path of another build of the binary (e.g. main's), measures it too, in the same run,
// as build=baseline beside build=this.
func BenchmarkFanout(b *testing.B) {
	counts := []int{100, 1000}
	if v := os.Getenv("FANOUT_SESSIONS"); v != "" {
		counts = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				b.Fatalf("FANOUT_SESSIONS: %q is not a count of at least 2", f)
			}
			counts = append(counts, n)
		}
	}
	builds := []struct{ name, path string }{{"this", sidecartest.Binary}}
	if p := os.Getenv("FANOUT_BASELINE"); p != "" {
		builds = append([]struct{ name, path string }{{"baseline", p}}, builds...)
	}
	steps := sidecartest.Session(b)
	for _, n := range counts {
		for _, build := range builds {
			b.Run(fmt.Sprintf("sessions=%d/build=%s", n, build.name), func(b *testing.B) {
				defer func(own string) { sidecartest.Binary = own }(sidecartest.Binary)
				sidecartest.Binary = build.path // launch starts the binary named here
				fanout(b, steps, n)
			})
		}
	}
}

// fanout runs b.N measured edits against n streams of a fresh sidecar.
func fanout(b *testing.B, steps []sidecartest.Step, n int) {
	dir := b.TempDir()
	w := sidecartest.StartPreloaded(b, filepath.Join(dir, ".jupyter_ystore.db"), steps)
	sc := sidecartest.StartSidecar(b, dir, sidecartest.Options{Debounce: -1})
	sc.WaitHTTP("/readyz", http.StatusOK)
	fc := newFanClient(b, sc.MCPURL(), n)
	edits := b.N
	fc.received = make([][]int64, n)
	for i := range fc.received {
		fc.received[i] = make([]int64, edits+1)
	}
	// A first edit, not measured, that every stream is told of.
	next := writeInvisible(w, steps, sidecartest.Preloaded)
	fc.expect(0)
	w.Write(steps[next].Update)
	next++
	fc.wait(0)
	committed, announced := make([]time.Time, edits+1), make([]time.Time, edits+1)
	cpu0, self0 := testenv.ProcCPU(b, sc.Cmd.Process.Pid), testenv.ProcCPU(b, os.Getpid())
	b.ResetTimer()
	for e := 1; e <= edits; e++ {
		if !sidecartest.Visible(steps[next:]) {
			b.Fatalf("edit %d: the recorded session has no visible step left; use fewer edits", e)
		}
		next = writeInvisible(w, steps, next)
		announced[e] = time.Now()
		fc.expect(e)
		committed[e] = w.Write(steps[next].Update)
		next++
		fc.wait(e)
		// The pace of the edits, a stimulus: each is its own burst.
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	cpu, self := testenv.ProcCPU(b, sc.Cmd.Process.Pid)-cpu0, testenv.ProcCPU(b, os.Getpid())-self0
	lat := make([]time.Duration, 0, n*edits)
	for _, times := range fc.received {
		for e := 1; e <= edits; e++ {
			at := time.Unix(0, times[e])
			if at.Before(announced[e]) {
				b.Fatalf("edit %d received before it was written: a notification counted for the wrong edit", e)
			}
			// Slightly negative when the writer was preempted between its commit and
			// reading the clock (a loaded machine): kept, as measured.
			lat = append(lat, at.Sub(committed[e]))
		}
	}
	// The slowest edits, first and last stream told: a whole edit late (a stall of the
	// tailer, the writer, the machine) or some streams late (the fan-out).
	type edit struct {
		n           int
		first, last time.Duration
	}
	spread := make([]edit, edits)
	for e := range spread {
		spread[e] = edit{e + 1, lat[e], lat[e]}
		for i := range n {
			d := lat[i*edits+e]
			spread[e].first, spread[e].last = min(spread[e].first, d), max(spread[e].last, d)
		}
	}
	slices.SortFunc(spread, func(a, b edit) int { return cmp.Compare(b.last, a.last) })
	var slow []string
	for _, e := range spread[:min(3, edits)] {
		slow = append(slow, fmt.Sprintf("edit %d: first told %v, last %v", e.n, e.first.Round(10*time.Microsecond), e.last.Round(10*time.Microsecond)))
	}
	b.Logf("slowest edits: %s", strings.Join(slow, "; "))
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(ms(cpu)/float64(edits), "sidecar-cpu-ms/edit")
	b.ReportMetric(ms(self)/float64(edits), "client-cpu-ms/edit")
	b.ReportMetric(0, "ns/op") // the edits are paced: time per edit says nothing
	b.Logf("sessions=%d edits=%d p50 %v p99 %v max %v; sidecar CPU %v/edit, client %v/edit; load %s",
		n, edits, lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1], cpu/time.Duration(edits), self/time.Duration(edits), testenv.LoadAvg())
}

// fanClient holds the benchmark's streams: one net.Conn each, set up with net/http's
// request writer and response reader, then read by poll, the SSE lines matched as bytes. Each stream records, per edit,
// when its first notification for it arrived.
type fanClient struct {
	b    *testing.B
	url  string
	host string
	http *http.Client // the setup's requests

	edit     atomic.Int64 // the edit being waited for
	arrived  atomic.Int64 // streams told of it
	n        int64
	all      chan struct{} // one per edit, sent when every stream is told of it
	received [][]int64     // per stream, per edit (0: the warm-up): unix nanoseconds of receipt, set before the first expect
	conns    []net.Conn    // until poll holds their sockets by fds
	fds      []int         // duplicates of the connections' descriptors, read by poll
	epoll    int
	closed   atomic.Bool
}

// newFanClient opens n streams on the sidecar at url, half of each era, binding the
// notebook and subscribing every one to it.
func newFanClient(b *testing.B, url string, n int) *fanClient {
	host := strings.TrimPrefix(strings.TrimSuffix(url, "/mcp"), "http://")
	fc := &fanClient{b: b, url: url, host: host, n: int64(n), all: make(chan struct{}, 1),
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	fc.edit.Store(-1)
	b.Cleanup(fc.close)
	conns := make([]net.Conn, n)
	readers := make([]*bufio.Reader, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		open := func() {
			if i%2 == 0 {
				conns[i], readers[i] = fc.session(i == 0)
			} else {
				conns[i], readers[i] = fc.listen()
			}
		}
		if i == 0 { // binds the name the others subscribe to
			open()
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			open()
		})
	}
	wg.Wait()
	fc.conns = conns // closed by fc.close from here on
	if b.Failed() {
		b.FailNow()
	}
	fc.http.CloseIdleConnections()
	fc.poll(readers)
	return fc
}

// do sends one JSON-RPC message over the setup client and returns the response.
func (fc *fanClient) do(version, session, body string) (*http.Response, []byte) {
	req, _ := http.NewRequest(http.MethodPost, fc.url, strings.NewReader(body))
	fc.headers(req.Header, version, session)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := fc.http.Do(req)
	if err != nil {
		fc.b.Error(err)
		return nil, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 || bytes.Contains(raw, []byte(`"error"`)) {
		fc.b.Errorf("%s: %s %s", body, resp.Status, raw)
	}
	return resp, raw
}

func (fc *fanClient) headers(h http.Header, version, session string) {
	h.Set("Authorization", "Bearer "+sidecartest.Token)
	h.Set("Mcp-Protocol-Version", version)
	if session != "" {
		h.Set("Mcp-Session-Id", session)
	}
}

// session opens a 2025-11-25 session subscribed to the notebook (bound first if bind)
// and its GET stream.
func (fc *fanClient) session(bind bool) (net.Conn, *bufio.Reader) {
	resp, _ := fc.do("2025-11-25", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fanout","version":"1"}}}`)
	if resp == nil {
		return nil, nil
	}
	id := resp.Header.Get("Mcp-Session-Id")
	fc.do("2025-11-25", id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if bind {
		fc.do("2025-11-25", id, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"use_notebook","arguments":{"notebook_name":%q,"notebook_path":%q}}}`, sidecartest.NbName, sidecartest.NbPath))
	}
	fc.do("2025-11-25", id, fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":%q}}`, sidecartest.NbURI))
	req, _ := http.NewRequest(http.MethodGet, fc.url, nil)
	fc.headers(req.Header, "2025-11-25", id)
	req.Header.Set("Accept", "text/event-stream")
	// The stream counts as open once the sidecar answered 200.
	return fc.stream(req, "")
}

// listen opens a 2026-07-28 subscriptions/listen stream on the notebook and waits for
// its acknowledgement.
func (fc *fanClient) listen() (net.Conn, *bufio.Reader) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"fanout","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"resourceSubscriptions":[%q]}}}`, sidecartest.NbURI)
	req, _ := http.NewRequest(http.MethodPost, fc.url, strings.NewReader(body))
	fc.headers(req.Header, "2026-07-28", "")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return fc.stream(req, "notifications/subscriptions/acknowledged")
}

// stream sends req on a connection of its own, checks the response is an event
// stream, reads up to the data line holding until (none: nothing) and returns the
// connection and its reader, positioned in the body.
func (fc *fanClient) stream(req *http.Request, until string) (net.Conn, *bufio.Reader) {
	conn, err := net.Dial("tcp", fc.host)
	if err != nil {
		fc.b.Error(err)
		return nil, nil
	}
	if err := req.Write(conn); err != nil {
		fc.b.Error(err)
		return conn, nil
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		fc.b.Error(err)
		return conn, nil
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		fc.b.Errorf("%s stream: %s %s", req.Method, resp.Status, resp.Header.Get("Content-Type"))
		return conn, nil
	}
	// The body, chunked, read line by line by the stream's goroutine.
	body := bufio.NewReaderSize(resp.Body, 64<<10)
	for until != "" {
		line, err := body.ReadSlice('\n')
		if err != nil {
			fc.b.Errorf("%s stream ended before %s: %v", req.Method, until, err)
			return conn, nil
		}
		if bytes.HasPrefix(line, []byte("data:")) && bytes.Contains(line, []byte(until)) {
			break
		}
	}
	return conn, body
}

var updated = []byte(`"notifications/resources/updated"`)

// poll reads every stream from one goroutine: one epoll instance over duplicates of
// the connections' descriptors, one read(2) per ready stream and no goroutine woken
// per notification. The setup's readers hold nothing the benchmark counts (the
// acknowledgements are read).
func (fc *fanClient) poll(readers []*bufio.Reader) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		fc.b.Fatal(err)
	}
	stream := map[int32]int{} // descriptor → stream
	for i, c := range fc.conns {
		if held, _ := readers[i].Peek(readers[i].Buffered()); bytes.Contains(held, updated) {
			fc.b.Fatalf("stream %d: a notification before the first edit", i)
		}
		raw, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			fc.b.Fatal(err)
		}
		var fd int
		if err := raw.Control(func(orig uintptr) { fd, err = unix.Dup(int(orig)) }); err != nil || fd < 0 {
			fc.b.Fatal(err)
		}
		// The connection is closed once its socket is held by the duplicate: the
		// runtime's own poller would otherwise be woken by every arrival on it, for
		// nobody (a sixth of the client's CPU).
		_ = c.Close()
		fc.conns[i] = nil
		fc.fds = append(fc.fds, fd)
		stream[int32(fd)] = i
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			fc.b.Fatal(err)
		}
	}
	fc.epoll = ep
	partial := make([][]byte, len(fc.conns)) // per stream, the line a read ended in
	seen := make([]int64, len(fc.conns))     // per stream, the last edit it was told of
	for i := range seen {
		seen[i] = -1
	}
	go func() {
		events := make([]unix.EpollEvent, 256)
		buf := make([]byte, 64<<10)
		for !fc.closed.Load() {
			n, err := unix.EpollWait(ep, events, 100) // ms: how soon close is noticed
			if err != nil && err != unix.EINTR {
				return
			}
			for _, ev := range events[:max(n, 0)] {
				i := stream[ev.Fd]
				m, err := unix.Read(int(ev.Fd), buf)
				if m <= 0 {
					if err != unix.EAGAIN {
						_ = unix.EpollCtl(ep, unix.EPOLL_CTL_DEL, int(ev.Fd), nil)
					}
					continue
				}
				data := buf[:m]
				if len(partial[i]) > 0 {
					data = append(partial[i], data...)
				}
				for {
					end := bytes.IndexByte(data, '\n')
					if end < 0 {
						break
					}
					line := data[:end]
					data = data[end+1:]
					if !bytes.HasPrefix(line, []byte("data:")) || !bytes.Contains(line, updated) {
						continue
					}
					now := time.Now().UnixNano()
					e := fc.edit.Load()
					if e == seen[i] || e < 0 {
						continue // another notification of the same edit
					}
					seen[i] = e
					fc.received[i][e] = now
					if fc.arrived.Add(1) == fc.n {
						fc.all <- struct{}{}
					}
				}
				partial[i] = append(partial[i][:0], data...)
			}
		}
	}()
}

// expect announces edit e: the next notification on each stream is its.
func (fc *fanClient) expect(e int) {
	fc.arrived.Store(0)
	fc.edit.Store(int64(e))
}

// wait returns once every stream was told of edit e.
func (fc *fanClient) wait(e int) {
	select {
	case <-fc.all:
	case <-time.After(testenv.Wait):
		fc.b.Fatalf("edit %d: %d of %d streams not told within %v", e, fc.n-fc.arrived.Load(), fc.n, testenv.Wait)
	}
}

func (fc *fanClient) close() {
	fc.closed.Store(true)
	for _, fd := range append(fc.fds, fc.epoll) {
		_ = unix.Close(fd)
	}
	for _, c := range fc.conns {
		if c != nil {
			_ = c.Close()
		}
	}
}
