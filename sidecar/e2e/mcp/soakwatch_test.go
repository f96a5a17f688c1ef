package mcp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// readySample is one answer of /readyz.
type readySample struct {
	at   time.Time
	code int // 0: the request failed
	body string
}

// pollReady asks /readyz every interval until ctx ends and returns what it answered.
func pollReady(ctx context.Context, url string, interval time.Duration) func() []readySample {
	var out []readySample
	hc := &http.Client{Timeout: 2 * time.Second}
	wait := every(ctx, interval, func() {
		s := readySample{at: time.Now()}
		if resp, err := hc.Get(url + "/readyz"); err != nil {
			s.body = err.Error()
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			s.code, s.body = resp.StatusCode, strings.TrimSpace(string(b))
		}
		out = append(out, s)
	})
	return func() []readySample {
		wait()
		return out
	}
}

// every runs fn at once and then every interval, in one goroutine, until ctx ends; the
// function it returns waits for that goroutine.
func every(ctx context.Context, interval time.Duration, fn func()) func() {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			fn()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return wg.Wait
}

// fault is a period during which /readyz must answer 503: the store unreadable or a
// room degraded. During an optional one (a store briefly without its schema while a
// fresh file is created) it may answer either.
type fault struct {
	name       string
	start, end time.Time
	optional   bool
}

// readyTruth is how /readyz followed the fault schedule.
type readyTruth struct {
	polls       int
	failed      int           // requests that got no answer
	unreported  []string      // faults never answered 503
	readyInside int           // 200 answers inside a fault once it had been reported
	optional503 int           // 503 answers inside optional faults
	perFault    []string      // each fault: start → first 503, end → first 200
	detect      time.Duration // longest fault start → first 503
	recover     time.Duration // longest fault end → first 200
	notReady    []readySample // non-200 answers outside every fault and its recovery
}

// judgeReady compares the /readyz answers with the faults: each fault must be answered
// 503 from some point on until it ends, and everything else 200, except within
// recovery after a fault ends.
func judgeReady(samples []readySample, faults []fault, recovery time.Duration) readyTruth {
	r := readyTruth{polls: len(samples)}
	for _, s := range samples {
		if s.code == 0 {
			r.failed++
		}
	}
	for _, f := range faults {
		if f.optional {
			for _, s := range samples {
				if !s.at.Before(f.start) && !s.at.After(f.end.Add(recovery)) && s.code == http.StatusServiceUnavailable {
					r.optional503++
				}
			}
			r.perFault = append(r.perFault, fmt.Sprintf("%s (%s–%s): %d polls 503 until %v after", f.name,
				f.start.Format("15:04:05.000"), f.end.Format("15:04:05.000"), r.optional503, recovery))
			continue
		}
		var detected, recovered time.Time
		for _, s := range samples {
			switch {
			case s.at.Before(f.start):
			case !s.at.After(f.end):
				if s.code == http.StatusServiceUnavailable && detected.IsZero() {
					detected = s.at
				} else if s.code == http.StatusOK && !detected.IsZero() {
					r.readyInside++
				}
			case recovered.IsZero() && s.code == http.StatusOK:
				recovered = s.at
			}
		}
		line := f.name + ": 503 after "
		if detected.IsZero() {
			r.unreported = append(r.unreported, f.name)
			line += "never"
		} else {
			r.detect = max(r.detect, detected.Sub(f.start))
			line += detected.Sub(f.start).Round(time.Millisecond).String()
		}
		line += ", 200 after the restore "
		if !recovered.IsZero() {
			r.recover = max(r.recover, recovered.Sub(f.end))
			line += recovered.Sub(f.end).Round(time.Millisecond).String()
		} else {
			line += "never"
		}
		r.perFault = append(r.perFault, line)
	}
outer:
	for _, s := range samples {
		if s.code == http.StatusOK {
			continue
		}
		for _, f := range faults {
			if !s.at.Before(f.start) && !s.at.After(f.end.Add(recovery)) {
				continue outer
			}
		}
		r.notReady = append(r.notReady, s)
	}
	return r
}

// procUsage is the sidecar process's peak resident memory and open file descriptors.
type procUsage struct {
	peakRSS, hwm int64 // kB: largest VmRSS sampled, and the kernel's VmHWM at the end
	peakFDs      int
	firstRSS     int64 // kB and descriptors at the first sample (all clients connected)
	firstFDs     int
	lastRSS      int64
	lastFDs      int
	samples      int
	sampleErrors int
	perMinute    []string // "RSS MB/heap in use MB/live heap MB/fds/goroutines" once a minute
}

// watchProc samples /proc/PID every interval until ctx ends; once a minute it also
// notes the Go heap in use and the goroutines from the sidecar's /metrics at url.
func watchProc(ctx context.Context, pid int, url string, interval time.Duration) func() procUsage {
	var u procUsage
	wait := every(ctx, interval, func() {
		rss, err := testenv.ReadProcStatus(pid, "VmRSS")
		hwm, herr := testenv.ReadProcStatus(pid, "VmHWM")
		fds, ferr := testenv.ReadOpenFiles(pid, "")
		if err != nil || herr != nil || ferr != nil {
			u.sampleErrors++
			return
		}
		if u.samples == 0 {
			u.firstRSS, u.firstFDs = rss, fds
		}
		if u.samples%60 == 0 {
			heap, live, goroutines := goMetrics(url)
			u.perMinute = append(u.perMinute, fmt.Sprintf("%.1f/%.1f/%.1f/%d/%d", float64(rss)/1024, heap/(1<<20), live/(1<<20), fds, int(goroutines)))
		}
		u.samples++
		u.peakRSS, u.peakFDs = max(u.peakRSS, rss), max(u.peakFDs, fds)
		u.lastRSS, u.lastFDs, u.hwm = rss, fds, hwm
	})
	return func() procUsage {
		wait()
		return u
	}
}

// goMetrics reads go_memstats_heap_inuse_bytes, the heap live after the last GC (half
// of go_memstats_next_gc_bytes at GOGC=100) and go_goroutines from /metrics.
func goMetrics(url string) (heap, live, goroutines float64) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return -1, -1, -1
	}
	defer resp.Body.Close()
	fams, err := testenv.ParseMetrics(resp.Body)
	if err != nil {
		return -1, -1, -1
	}
	return testenv.Sum(fams, "go_memstats_heap_inuse_bytes"), testenv.Sum(fams, "go_memstats_next_gc_bytes") / 2, testenv.Sum(fams, "go_goroutines")
}
