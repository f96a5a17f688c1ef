package hub

import (
	"cmp"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres"
)

// latencies are commit → notification times of one replica's listeners: each row's
// commit (the writer's) waits for the first notification of its notebook after it.
type latencies struct {
	mu      sync.Mutex
	pending map[string][]time.Time // user + URI → commits not notified yet
	got     []time.Duration
}

// commit records a row of u's notebook uri committed at at.
func (l *latencies) commit(u *rigUser, uri string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending[u.name+" "+uri] = append(l.pending[u.name+" "+uri], at)
}

// notified records the notification of u's uri received at at: the rows committed
// before it are told.
func (l *latencies) notified(u *rigUser, uri string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := u.name + " " + uri
	q := l.pending[key]
	n := 0
	for n < len(q) && !q[n].After(at) {
		l.got = append(l.got, at.Sub(q[n]))
		n++
	}
	l.pending[key] = q[n:]
}

// waiting counts the rows not notified yet.
func (l *latencies) waiting() (n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.pending {
		n += len(q)
	}
	return n
}

// take returns the latencies so far, sorted, and forgets them and the rows waiting.
func (l *latencies) take() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.got
	l.got, l.pending = nil, map[string][]time.Time{}
	slices.Sort(got)
	return got
}

// pct is the p-th percentile of sorted ds (0 for none).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, len(ds)*p/100)].Round(100 * time.Microsecond)
}

// pgTypists is how many connections typePostgres appends over; each user's rows go
// through one of them, in order.
const pgTypists = 4

// typePostgres appends the next steps of users' notebooks straight into the Postgres
// store, as ship does, rate rows/s hub-wide (users in turn, each user's notebooks in
// turn), until stop returns: the write rate is then not the writers' and ships' but
// Postgres's. committed is told each row's room and the time its insert returned. Stop
// ends the pace and waits for the rows asked for so far: a step taken is always
// written (a notebook missing one would wait for it).
func (rg *rig) typePostgres(t *testing.T, users []*rigUser, rate int, committed func(u *rigUser, j int, at time.Time)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	insert := `INSERT INTO ` + pgx.Identifier{rg.schema, postgres.DefaultTable}.Sanitize() + ` (path, yupdate) VALUES ($1, $2)`
	var wg sync.WaitGroup
	queues := make([]chan [2]int, pgTypists)
	for q := range queues {
		conn, err := pgx.Connect(context.Background(), rg.dsn)
		if err != nil {
			t.Fatal(err)
		}
		queues[q] = make(chan [2]int, 4096)
		wg.Go(func() {
			defer conn.Close(context.Background())
			for job := range queues[q] {
				u, j := users[job[0]], job[1]
				update, ok := u.claim(rg.steps, j)
				if !ok {
					continue
				}
				if _, err := conn.Exec(context.Background(), insert, u.rooms[j], update); err != nil {
					t.Error(err)
					continue
				}
				committed(u, j, time.Now())
			}
		})
	}
	wg.Go(func() {
		defer func() {
			for _, q := range queues {
				close(q)
			}
		}()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for k := 0; ; k++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C: // the typists' pace
			}
			i := k % len(users)
			queues[i%pgTypists] <- [2]int{i, (k / len(users)) % len(users[i].rooms)}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// TestHubRigBench measures one replica of the rig (issue 42, "Follow capacity", "Load
// by room"): E2E_HUBRIG_USERS active users (40) of E2E_HUBRIG_NOTEBOOKS notebooks (2)
// listen on replica 0 while they type at each hub-wide rate of E2E_HUBRIG_RATES rows/s
// ("50,100,200,400") for E2E_HUBRIG_SECONDS (10) each, their rows appended straight
// into Postgres as ship appends them (E2E_HUBRIG_TYPE=writer: written by their writers
// and shipped, which this machine's Python writers bound): the rate written, replica 0's
// largest tail lag, commit → notification p50/p99 and its CPU per 1,000 rows; then its
// memory per active user; then E2E_HUBRIG_COLD idle users (20) each connect and read a
// notebook for the first time. Notifications are not debounced. It takes minutes, so
// it runs only with E2E_HUBRIG_BENCH=1 and without -race (bench/hubrig.sh).
func TestHubRigBench(t *testing.T) {
	if os.Getenv("E2E_HUBRIG_BENCH") != "1" {
		t.Skip("set E2E_HUBRIG_BENCH=1 to measure")
	}
	if sidecartest.RaceBuild {
		t.Skip("measure without -race")
	}
	active, cold := sidecartest.EnvInt(t, "E2E_HUBRIG_USERS", 40), sidecartest.EnvInt(t, "E2E_HUBRIG_COLD", 20)
	notebooks, seconds := sidecartest.EnvInt(t, "E2E_HUBRIG_NOTEBOOKS", 2), sidecartest.EnvInt(t, "E2E_HUBRIG_SECONDS", 10)
	var rates []int
	for _, f := range strings.Split(cmp.Or(os.Getenv("E2E_HUBRIG_RATES"), "50,100,200,400"), ",") {
		r, err := strconv.Atoi(f)
		if err != nil || r < 1 {
			t.Fatalf("E2E_HUBRIG_RATES: %q", f)
		}
		rates = append(rates, r)
	}
	byWriters := os.Getenv("E2E_HUBRIG_TYPE") == "writer"
	rg := startRig(t, active+cold, notebooks, "{debounce: 0s, max_delay: 1s}")
	r0 := rg.replicas[0]
	pid := r0.Cmd.Process.Pid
	direct := r0.URL + "/services/mcp/mcp"
	rss := func() float64 { return testenv.ProcStatus(t, pid, "VmRSS") }
	baseline, baseHeap := rss(), r0.Metric("go_memstats_heap_inuse_bytes")/1e6

	// The active users load on replica 0 and listen there.
	lat := &latencies{pending: map[string][]time.Time{}}
	var unbound atomic.Int64
	begin := time.Now()
	for _, u := range rg.users[:active] {
		c := mustGoAs(t, direct, true, u.tok)
		heard := map[string]string{}
		for _, uri := range u.uris {
			readBound(t, c, uri, &unbound)
			_, heard[uri] = c.ReadVersioned(uri)
		}
		newListener(t, direct, u.auth, heard, func(uri string, at time.Time) { lat.notified(u, uri, at) })
	}
	t.Logf("HUBRIG %d active users loaded and listening on replica 0 in %v; RSS %.1f MB (idle %.1f MB): %.0f kB per active user (%d notebooks each); Go heap in use %.1f MB (idle %.1f MB); load average %s",
		active, time.Since(begin).Round(time.Millisecond), rss(), baseline, (rss()-baseline)*1e3/float64(active), notebooks,
		r0.Metric("go_memstats_heap_inuse_bytes")/1e6, baseHeap, testenv.LoadAvg())

	// Each rate: every active user types rate/active rows/s.
	for _, rate := range rates {
		var rows atomic.Int64
		wakeups := func() (notify, poll float64) {
			return r0.Metric("jupyter_mcp_sidecar_postgres_wakeups_total", "by", "notify"), r0.Metric("jupyter_mcp_sidecar_postgres_wakeups_total", "by", "poll")
		}
		notify0, poll0 := wakeups()
		reads0 := r0.Metric("jupyter_mcp_sidecar_postgres_read_seconds_count")
		cpu0 := testenv.ProcCPU(t, pid)
		start := time.Now()
		committed := func(u *rigUser, j int, at time.Time) {
			rows.Add(1)
			lat.commit(u, u.uris[j], at)
		}
		stop := rg.typePostgres(t, rg.users[:active], rate, committed)
		if byWriters {
			stop = rg.typeAll(rg.users[:active], max(1, rate/active), committed)
		}
		var lag float64
		for time.Since(start) < time.Duration(seconds)*time.Second {
			lag = max(lag, r0.Metric("jupyter_mcp_sidecar_tail_lag_seconds"))
			time.Sleep(250 * time.Millisecond) // the sampling pace
		}
		stop()
		wrote := time.Since(start)
		// A row that changes nothing served (a cursor, say) is never notified: at most
		// a few such rows stay waiting.
		_ = testenv.Within(10*time.Second, func() bool { return lat.waiting() == 0 })
		waiting := lat.waiting()
		ds := lat.take()
		n := rows.Load()
		notify, poll := wakeups()
		t.Logf("HUBRIG rate %d rows/s asked (%d users × %d): %d rows in %v = %.0f rows/s written (%d never notified: they change nothing served); replica 0: tail lag max %.3fs, commit → notification p50 %v p99 %v max %v, CPU %.2f s per 1,000 rows, %v reads (woken by NOTIFY %v, by the poll %v); load average %s",
			rate, active, max(1, rate/active), n, wrote.Round(time.Millisecond), float64(n)/wrote.Seconds(), waiting, lag,
			pct(ds, 50), pct(ds, 99), pct(ds, 100), float64((testenv.ProcCPU(t, pid)-cpu0).Milliseconds())/float64(max(n, 1)), r0.Metric("jupyter_mcp_sidecar_postgres_read_seconds_count")-reads0, notify-notify0, poll-poll0, testenv.LoadAvg())
	}
	t.Logf("HUBRIG after the rates: RSS %.1f MB, %.0f kB per active user (versions kept: %v); load average %s",
		rss(), (rss()-baseline)*1e3/float64(active), r0.Metric("jupyter_mcp_sidecar_versions_kept"), testenv.LoadAvg())
	// Every row was followed: replica 0 serves each active notebook as written.
	for _, u := range rg.users[:active] {
		c := mustGoAs(t, direct, true, u.tok)
		for j, uri := range u.uris {
			sidecartest.EventuallyJSON(t, u.name+" "+uri+" on replica 0", sidecartest.TryReadText(c, uri), u.want(t, rg.steps, j))
		}
		c.Close()
	}

	// First reads of idle users' notebooks on replica 0.
	ds := make([]time.Duration, 0, cold)
	for i, u := range rg.users[active:] {
		begin := time.Now()
		c := mustGoAs(t, direct, true, u.tok)
		if body := readBound(t, c, u.uris[i%notebooks], &unbound); !strings.Contains(body, `"cells"`) {
			t.Fatalf("%s's first read: %.200s", u.name, body)
		}
		ds = append(ds, time.Since(begin))
		c.Close()
	}
	slices.Sort(ds)
	t.Logf("HUBRIG first read of an idle user's notebook (connect with a Hub token + read), %d users of %d notebooks: p50 %v, p99 %v, max %v; %d reads answered \"not bound\" first; load average %s",
		cold, notebooks, pct(ds, 50), pct(ds, 99), pct(ds, 100), unbound.Load(), testenv.LoadAvg())
}
