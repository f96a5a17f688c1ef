package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestStartChild: a child answers through its pipes; Stop closes its stdin and says how
// it exited, with its stderr, the same on every call; Interrupt ends a child that reads
// nothing; at the test's end, CleanExit fails the test on an unclean exit and AnyExit
// does not; a child that ignores both is killed after ChildGrace.
func TestStartChild(t *testing.T) {
	t.Run("pipes", func(t *testing.T) {
		c := StartChild(t, exec.Command("sh", "-c", `read line; echo "got $line"; echo note >&2`), CleanExit)
		if _, err := c.In.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(c.Out).ReadString('\n'); line != "got ping\n" {
			t.Fatalf("child said %q, %v", line, err)
		}
		if err := c.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if !c.Stderr.Contains("note") {
			t.Errorf("stderr %q, want its note", c.Stderr)
		}
	})
	for _, tt := range []struct {
		name   string
		exit   Exit
		script string
		failed bool
	}{
		{"clean exit", CleanExit, "cat >/dev/null", false},
		{"unclean exit checked", CleanExit, "cat >/dev/null; echo boom >&2; exit 3", true},
		{"unclean exit accepted", AnyExit, "cat >/dev/null; echo boom >&2; exit 3", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{TB: t}
			var c *Child
			t.Run("child", func(t *testing.T) {
				r.TB = t
				c = StartChild(r, exec.Command("sh", "-c", tt.script), tt.exit)
			})
			if (r.err != "") != tt.failed {
				t.Fatalf("the test's end reported %q; want a failure: %v", r.err, tt.failed)
			}
			err := c.Stop()
			if tt.failed && (err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "boom")) {
				t.Errorf("Stop after the end = %v; want the exit status and the stderr again", err)
			}
		})
	}
	t.Run("interrupt", func(t *testing.T) {
		c := StartChild(t, exec.Command("sleep", "60"), AnyExit)
		start := time.Now()
		if err := c.Interrupt(); err == nil || time.Since(start) >= ChildGrace {
			t.Fatalf("Interrupt = %v after %v; want the signal's exit at once", err, time.Since(start))
		}
	})
	t.Run("deaf child killed", func(t *testing.T) {
		c := StartChild(t, exec.Command("sleep", "60"), AnyExit) // it reads no stdin
		start := time.Now()
		err := c.Stop()
		if err == nil || !strings.Contains(err.Error(), "did not exit within") || time.Since(start) < ChildGrace {
			t.Fatalf("Stop = %v after %v; want a kill after %v", err, time.Since(start), ChildGrace)
		}
	})
}

// TestProc: the /proc readers on this test's own process.
func TestProc(t *testing.T) {
	pid := os.Getpid()
	if rss := ProcStatus(t, pid, "VmRSS"); rss <= 0 {
		t.Errorf("VmRSS %v MB", rss)
	}
	if _, err := ReadProcStatus(pid, "NoSuchField"); err == nil {
		t.Error("a field /proc/pid/status lacks: no error")
	}
	if _, err := ReadProcStatus(-1, "VmRSS"); err == nil {
		t.Error("no such process: no error")
	}
	busy := time.Now()
	for time.Since(busy) < 50*time.Millisecond { // CPU time to count
	}
	if cpu := ProcCPU(t, pid); cpu <= 0 {
		t.Errorf("CPU %v", cpu)
	}
	if st, err := ReadProcStat(pid); err != nil || st.PPid != os.Getppid() || st.CPU <= 0 {
		t.Errorf("ReadProcStat: %+v, %v; want parent %d and CPU time", st, err, os.Getppid())
	}
	if _, err := ReadProcStat(-1); err == nil {
		t.Error("ReadProcStat of no process: no error")
	}
	if busy, err := MachineCPU(); err != nil || busy <= 0 {
		t.Errorf("MachineCPU: %v, %v", busy, err)
	}
	f, err := os.CreateTemp(t.TempDir(), "open-*.db")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := OpenFiles(t, pid, f.Name()); n != 1 {
		t.Errorf("%d open files named %s, want 1", n, f.Name())
	}
	if n := OpenFiles(t, pid, ""); n < 4 {
		t.Errorf("%d open files, want stdin, stdout, stderr and the temp file at least", n)
	}
	r := &recorder{TB: t}
	OpenFiles(r, -1, "")
	if r.fatal == "" {
		t.Error("OpenFiles of no process: no failure")
	}
	if l := LoadAvg(); len(strings.Fields(l)) != 3 {
		t.Errorf("LoadAvg %q", l)
	}
}

// TestGatherAndSeries: Gather hands a registry's families to Sum as Scrape hands a
// /metrics body's; Series names the samples of the families asked for.
func TestGatherAndSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "x_mcp_sessions", Help: "sessions"}, []string{"era"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "read_seconds", Help: "reads"})
	reg.MustRegister(v, h)
	v.WithLabelValues("a").Set(2)
	h.Observe(1)
	fams := Gather(t, reg)
	if got := Sum(fams, "x_mcp_sessions", "era", "a"); got != 2 {
		t.Errorf("sessions{era=a} %v, want 2", got)
	}
	if got := Sum(fams, "read_seconds_count"); got != 1 {
		t.Errorf("read_seconds_count %v, want 1", got)
	}
	if s := Series(reg, "_mcp_"); !strings.Contains(s, "x_mcp_sessions") || !strings.Contains(s, "=2") || strings.Contains(s, "read_seconds") {
		t.Errorf("Series = %q", s)
	}
}
