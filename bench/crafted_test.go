package bench

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/yjstest"
)

// TestCraftedShapes measures, for docs/BENCHMARKS.md ("Crafted stores"), what rows a hub
// user can craft so that their cost grows faster than their number cost ystore/yjs and
// pycrdt (bench/crafted.py, the Jupyter server's engine), the same updates in one run:
// rows each pending on a different missing client; rows from a client each inserting at
// one place (a text's start, a map key's first set), whose conflict scans walk all the
// earlier ones; one row of a client each, each struct after the one of the client below
// (integrated from the top down, each waiting on a stack); a row of deletes of a client
// the document lacks (pending), then keystrokes of another, each of which tried all the
// deletes again; and a row of structs, a client each, waiting for clocks of a client
// that then types, never reaching them or reaching them one by one (yrs tries every
// pending struct again at each keystroke). The engine stops some at its work bound
// (yjs.ErrWork); it reports the row where. Run only with YCRAFTED=N (rows per shape); pycrdt runs when
// SIDECAR_TEST_JUPYTER_VENV names the pinned environment.
func TestCraftedShapes(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("YCRAFTED"))
	if err != nil || n <= 0 {
		t.Skip("set YCRAFTED=N (rows per shape) to measure")
	}
	shapes := []struct {
		name string
		row  func(i uint64) []byte
	}{
		{"pending, a missing client each", func(i uint64) []byte { return yjstest.Char(i+1, "source", 1) }},
		{"inserts at a text's start, a client each", func(i uint64) []byte { return yjstest.TextAt(i+1, 0, "source", "x") }},
		{"a map key's first sets, a client each", func(i uint64) []byte { return yjstest.MapSet(i+1, "meta", "k", "v") }},
		{"one row, a client each after the one below", func(i uint64) []byte {
			if i == 0 {
				return yjstest.Clients(1, "source", n) // integrated from the top client down, each stacked
			}
			return []byte{0, 0} // an empty update: the shape is its first row
		}},
		{"100,000 deletes ahead, then keystrokes", func(i uint64) []byte {
			if i == 0 {
				return yjstest.Deletes(1, 0, 2, 100_000) // of a client the document lacks: pending
			}
			return yjstest.Char(2, "source", i-1)
		}},
		{"5,000 waiting far ahead, then keystrokes", func(i uint64) []byte {
			if i == 0 {
				return yjstest.Waiting(100, 5_000, 2, 10_000_000, 1) // clocks client 2 never reaches
			}
			return yjstest.Char(2, "source", i-1)
		}},
		{"5,000 waiting, reached one by one", func(i uint64) []byte {
			if i == 0 {
				return yjstest.Waiting(100, 5_000, 2, 0, 2) // every other keystroke reaches one
			}
			return yjstest.Char(2, "source", i-1)
		}},
	}
	dir := t.TempDir()
	var files []string
	for k, s := range shapes {
		var buf []byte
		var rows [][]byte
		for i := range uint64(n) {
			u := s.row(i)
			rows = append(rows, u)
			buf = binary.LittleEndian.AppendUint32(buf, uint32(len(u)))
			buf = append(buf, u...)
		}
		file := filepath.Join(dir, fmt.Sprintf("shape-%d.bin", k))
		if err := os.WriteFile(file, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
		d := yjs.NewDoc()
		failed, bad := -1, 0
		start := time.Now()
		for i, u := range rows {
			if _, err := d.ApplyUpdate(u); err != nil {
				bad++
				if failed < 0 && errors.Is(err, yjs.ErrWork) {
					failed = i
				}
			}
		}
		t.Logf("%-42s ystore/yjs: %d rows in %v, failed at the work bound at row %d, %d rows refused", s.name, n, time.Since(start).Round(time.Millisecond), failed, bad)
	}
	venv := os.Getenv("SIDECAR_TEST_JUPYTER_VENV")
	if venv == "" {
		t.Log("pycrdt not run: SIDECAR_TEST_JUPYTER_VENV is not set")
		return
	}
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), append([]string{"crafted.py"}, files...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for k := 0; sc.Scan(); k++ {
		var r struct {
			Updates, Errors int
			Seconds         float64
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		t.Logf("%-42s pycrdt:     %d rows in %.2f s, %d refused", shapes[k].name, r.Updates, r.Seconds, r.Errors)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}
