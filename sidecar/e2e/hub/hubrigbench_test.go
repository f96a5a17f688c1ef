package hub

import (
	"cmp"
	"context"
	"fmt"
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

// Bounds of typePostgres: the jobs queued on a connection (a rate the inserts cannot
// keep up with slows the pace instead of growing them) and the rows of one COPY.
const (
	pgQueued   = 1 << 14
	pgMaxBatch = 1000
)

// typed is what typePostgres typed: the COPYs, and the steps not taken because their
// notebook's session was over.
type typed struct{ copies, over int64 }

// typePostgres appends the next steps of users' notebooks straight into the Postgres
// store, as ship does (a COPY of the rows it has in one transaction), rate rows/s
// hub-wide (users in turn, each user's notebooks in turn), over typists connections,
// until stop returns: the write rate is then not the writers' and ships' but
// Postgres's. Each user's rows go through one connection, in order; a connection
// copies every row asked of it since its last COPY in the next one (at most
// pgMaxBatch), so that batches grow with the rate as ship's do when it catches up.
// committed is told each row's room and the time its COPY returned. Stop ends the
// pace, waits for the rows asked for so far (a step taken is always written: a
// notebook missing one would wait for it) and returns what was typed.
func (rg *rig) typePostgres(t *testing.T, users []*rigUser, rate, typists int, committed func(u *rigUser, j int, at time.Time)) (stop func() typed) {
	ctx, cancel := context.WithCancel(context.Background())
	table := pgx.Identifier{rg.schema, postgres.DefaultTable}
	var (
		wg           sync.WaitGroup
		over, copies atomic.Int64
	)
	type job struct{ user, room int }
	queues := make([]chan job, typists)
	for q := range queues {
		conn, err := pgx.Connect(context.Background(), rg.dsn)
		if err != nil {
			t.Fatal(err)
		}
		queues[q] = make(chan job, pgQueued)
		wg.Go(func() {
			defer conn.Close(context.Background())
			for first := range queues[q] {
				batch := []job{first}
			more:
				for len(batch) < pgMaxBatch {
					select {
					case j, ok := <-queues[q]:
						if !ok {
							break more
						}
						batch = append(batch, j)
					default:
						break more
					}
				}
				rows := make([][]any, 0, len(batch))
				taken := batch[:0]
				for _, j := range batch {
					u := users[j.user]
					if update, ok := u.claim(rg.steps, j.room); ok {
						rows = append(rows, []any{u.rooms[j.room], update})
						taken = append(taken, j)
					} else {
						over.Add(1)
					}
				}
				if len(rows) == 0 {
					continue
				}
				if _, err := conn.CopyFrom(context.Background(), table, []string{"path", "yupdate"}, pgx.CopyFromRows(rows)); err != nil {
					t.Error(err)
					continue
				}
				copies.Add(1)
				at := time.Now()
				for _, j := range taken {
					committed(users[j.user], j.room, at)
				}
			}
		})
	}
	wg.Go(func() {
		defer func() {
			for _, q := range queues {
				close(q)
			}
		}()
		tick := time.NewTicker(5 * time.Millisecond) // the pace's granularity
		defer tick.Stop()
		begin := time.Now()
		for k := 0; ; {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for due := int(time.Since(begin).Seconds() * float64(rate)); k < due; k++ {
				i := k % len(users)
				queues[i%typists] <- job{i, (k / len(users)) % len(users[i].rooms)}
			}
		}
	})
	return func() typed { cancel(); wg.Wait(); return typed{over: over.Load(), copies: copies.Load()} }
}

// TestHubRigBench measures one replica of the rig (issue 42, "Follow capacity", "Load
// by room"): E2E_HUBRIG_USERS active users (40) of E2E_HUBRIG_NOTEBOOKS notebooks (2)
// listen on replica 0 while they type at each hub-wide rate of E2E_HUBRIG_RATES rows/s
// ("50,100,200,400") for E2E_HUBRIG_SECONDS (10) each, their rows copied straight into
// Postgres in batches as ship appends them, over E2E_HUBRIG_TYPISTS connections (4)
// (E2E_HUBRIG_TYPE=writer: written by their writers and shipped, which this machine's
// Python writers bound): the rate written, replica 0's largest tail lag and backlog,
// how long it took to catch up once the writes stopped, commit → notification p50/p99,
// and the CPU per 1,000 rows of replica 0, replica 1, Postgres, the test and the
// machine; then replica 0's memory per active user; then E2E_HUBRIG_COLD idle users
// (20) each connect and read a notebook for the first time. Notifications are not
// debounced. It takes minutes, so it runs only with E2E_HUBRIG_BENCH=1 and without
// -race (bench/hubrig.sh).
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
	byWriters, typists := os.Getenv("E2E_HUBRIG_TYPE") == "writer", sidecartest.EnvInt(t, "E2E_HUBRIG_TYPISTS", 4)
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
	cpu := rg.cpuMeter(t)
	tailed := func() int64 { return int64(r0.Metric("jupyter_mcp_sidecar_rows_tailed_total")) }
	for _, rate := range rates {
		var rows atomic.Int64
		wakeups := func() (notify, poll float64) {
			return r0.Metric("jupyter_mcp_sidecar_postgres_wakeups_total", "by", "notify"), r0.Metric("jupyter_mcp_sidecar_postgres_wakeups_total", "by", "poll")
		}
		notify0, poll0 := wakeups()
		reads0 := r0.Metric("jupyter_mcp_sidecar_postgres_read_seconds_count")
		cpu0, tailed0 := cpu(), tailed()
		start := time.Now()
		committed := func(u *rigUser, j int, at time.Time) {
			rows.Add(1)
			lat.commit(u, u.uris[j], at)
		}
		stop := rg.typePostgres(t, rg.users[:active], rate, typists, committed)
		if byWriters {
			stopWriters := rg.typeAll(rg.users[:active], max(1, rate/active), committed)
			stop = func() typed { stopWriters(); return typed{} }
		}
		// Lag is replica 0's gauge (the age of the oldest row it read and has not
		// applied) and its backlog: the rows committed it has not applied yet.
		var (
			lag     float64
			backlog int64
		)
		for time.Since(start) < time.Duration(seconds)*time.Second {
			lag = max(lag, r0.Metric("jupyter_mcp_sidecar_tail_lag_seconds"))
			backlog = max(backlog, rows.Load()-(tailed()-tailed0))
			time.Sleep(250 * time.Millisecond) // the sampling pace
		}
		ty := stop()
		wrote := time.Since(start)
		n := rows.Load()
		// Caught up: replica 0 applied every row written. The CPU is counted until then.
		caughtUp := "never (2 min)"
		if testenv.Within(2*time.Minute, func() bool { return tailed()-tailed0 >= n }) == nil {
			caughtUp = time.Since(start.Add(wrote)).Round(time.Millisecond).String()
		}
		used, wall := cpu().minus(cpu0), time.Since(start)
		// A row that changes nothing served (a cursor, say) is never notified: at most
		// a few such rows stay waiting.
		_ = testenv.Within(5*time.Second, func() bool { return lat.waiting() == 0 })
		waiting := lat.waiting()
		ds := lat.take()
		notify, poll := wakeups()
		t.Logf("HUBRIG rate %d rows/s asked (%d users × %d): %d rows in %v = %.0f rows/s written (%.1f rows a COPY over %d connections; %d steps not taken: their session was over; %d rows never notified: they change nothing served); "+
			"replica 0: tail lag max %.3fs, backlog max %d rows, caught up %v after the writes stopped, commit → notification p50 %v p99 %v max %v, %v reads (woken by NOTIFY %v, by the poll %v); "+
			"CPU per 1,000 rows: %s; cores used over %v: %s; load average %s",
			rate, active, max(1, rate/active), n, wrote.Round(time.Millisecond), float64(n)/wrote.Seconds(), float64(n)/float64(max(ty.copies, 1)), typists, ty.over, waiting,
			lag, backlog, caughtUp, pct(ds, 50), pct(ds, 99), pct(ds, 100), r0.Metric("jupyter_mcp_sidecar_postgres_read_seconds_count")-reads0, notify-notify0, poll-poll0,
			used.per(float64(max(n, 1))/1000), wall.Round(time.Millisecond), used.per(wall.Seconds()), testenv.LoadAvg())
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

// cpuUse is the CPU time the parts of the rig sharing the machine have used: the
// replicas, Postgres (the postmaster and its processes), this test (the typists and
// the listeners) and the whole machine (the other processes on it included).
type cpuUse struct{ replica0, replica1, postgres, test, machine time.Duration }

// minus is the CPU time used since before.
func (c cpuUse) minus(before cpuUse) cpuUse {
	return cpuUse{c.replica0 - before.replica0, c.replica1 - before.replica1, c.postgres - before.postgres, c.test - before.test, c.machine - before.machine}
}

// per tells each part's seconds per unit of n units (n seconds: the cores it used).
func (c cpuUse) per(n float64) string {
	s := func(d time.Duration) float64 { return d.Seconds() / n }
	return fmt.Sprintf("replica 0 %.2f, replica 1 %.2f, Postgres %.2f, test (typists, listeners) %.2f, machine %.2f (other processes %.2f)",
		s(c.replica0), s(c.replica1), s(c.postgres), s(c.test), s(c.machine), s(c.machine-c.replica0-c.replica1-c.postgres-c.test))
}

// cpuMeter returns a reader of the CPU time the rig's parts have used so far.
func (rg *rig) cpuMeter(t *testing.T) func() cpuUse {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), rg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	var backend int
	err = conn.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend)
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st, err := testenv.ReadProcStat(backend)
	if err != nil {
		t.Fatal(err)
	}
	postmaster := st.PPid
	return func() cpuUse {
		pm, err := testenv.ReadProcStat(postmaster)
		if err != nil {
			t.Fatal(err)
		}
		pg := pm.CPU + pm.Children // the processes that ended count in Children
		procs, err := os.ReadDir("/proc")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			pid, err := strconv.Atoi(p.Name())
			if err != nil {
				continue
			}
			if st, err := testenv.ReadProcStat(pid); err == nil && st.PPid == postmaster {
				pg += st.CPU // one that ended since it was listed is not counted
			}
		}
		busy, err := testenv.MachineCPU()
		if err != nil {
			t.Fatal(err)
		}
		return cpuUse{testenv.ProcCPU(t, rg.replicas[0].Cmd.Process.Pid), testenv.ProcCPU(t, rg.replicas[1].Cmd.Process.Pid), pg, testenv.ProcCPU(t, os.Getpid()), busy}
	}
}
