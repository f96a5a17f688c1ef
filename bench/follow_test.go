package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/versions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// TestFollowShapes measures, for docs/BENCHMARKS.md ("Following a growing cell"), what
// following rows that grow one cell costs a room: each row applied alone
// (ynotebook.Notebook.Apply) and the state it leaves versioned (versions.History.Observe),
// as sidecar/rooms does per row, against a cold load of the same rows and against
// pycrdt applying them one at a time and reading the notebook once (bench/follow.py,
// which writes them with jupyter_ydoc): a cell's outputs growing by one a row, at the end
// or at the front (each output different, or all the same), a stream output's text by a
// line, and keystrokes at the end of a 1 MB source. CPU time, the
// collector's included. Run only with YFOLLOW=N (rows per shape) and
// SIDECAR_TEST_JUPYTER_VENV naming the pinned environment.
func TestFollowShapes(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("YFOLLOW"))
	venv := os.Getenv("SIDECAR_TEST_JUPYTER_VENV")
	if err != nil || n <= 0 || venv == "" {
		t.Skip("set YFOLLOW=N (rows per shape) and SIDECAR_TEST_JUPYTER_VENV to measure")
	}
	python := filepath.Join(venv, "bin", "python")
	dir := t.TempDir()
	if out, err := exec.Command(python, "follow.py", "write", dir, strconv.Itoa(n)).CombinedOutput(); err != nil {
		t.Fatalf("follow.py write: %v\n%s", err, out)
	}
	shapes := []string{"outputs", "prepended", "identical", "stream", "source"}
	var files []string
	for _, s := range shapes {
		file := filepath.Join(dir, s+".bin")
		files = append(files, file)
		buf, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rows := frames(buf)
		start := cpuTime()
		nb := ynotebook.New()
		h := versions.NewHistory("", "room", versions.Config{}, nil)
		for i, u := range rows {
			if _, err := nb.Apply(u); err != nil {
				t.Fatalf("%s row %d: %v", s, i, err)
			}
			h.Observe(nb.Snapshot())
		}
		live := cpuTime() - start
		start = cpuTime()
		cold := ynotebook.New()
		if err := cold.Load(rows); err != nil {
			t.Fatal(err)
		}
		versions.NewHistory("", "room", versions.Config{}, nil).Observe(cold.Snapshot())
		t.Logf("%-8s %d rows: live %.3f s, cold %.3f s of CPU", s, len(rows), float64(live)/1e9, float64(cpuTime()-start)/1e9)
	}
	cmd := exec.Command(python, append([]string{"follow.py", "time"}, files...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("follow.py time: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for k := 0; sc.Scan(); k++ {
		var r struct {
			Updates int
			Seconds float64
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		t.Logf("%-8s %d rows: pycrdt apply, then get() once: %.3f s", shapes[k], r.Updates, r.Seconds)
	}
}
