package search

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// The benchmark corpus: benchNotebooks generated notebooks of about 50 KB of
// nbformat JSON each (sources, stream and error outputs, data outputs with
// text/plain and text/html, one PNG in ten code cells), deterministic.
const benchNotebooks = 1000

var words = strings.Fields(`import numpy pandas matplotlib pyplot seaborn sklearn model train test split fit predict
score data frame series index column value row group mean median sum count plot figure axis label title legend
config path file load save read write open close print return for in if else elif while def class self lambda
result error warning loss accuracy epoch batch learning rate optimizer layer dense dropout tensor array shape
dtype float int str list dict tuple set range len zip map filter sorted min max abs round query merge join
concat pivot melt apply transform agg describe head tail sample shuffle seed random normal uniform choice`)

func sentence(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

func lines(r *rand.Rand, n, width int, prefix string) string {
	var b strings.Builder
	for range n {
		b.WriteString(prefix + sentence(r, width) + "\n")
	}
	return b.String()
}

// benchNotebook generates notebook i; edit > 0 varies one cell's source.
func benchNotebook(i, edit int) *ynotebook.Snapshot {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	png := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x89PNG figure bytes ", 100)))
	var cells []ynotebook.Cell
	for c := range 40 {
		id := fmt.Sprintf("n%d-c%d", i, c)
		if c%4 == 0 {
			cells = append(cells, ynotebook.Cell{ID: id, CellType: "markdown",
				Source: "## " + sentence(r, 4) + "\n\n" + lines(r, 3, 12, "")})
			continue
		}
		src := lines(r, 5+r.IntN(6), 6, "")
		if r.IntN(100) == 0 {
			src += "df = pd.read_csv('data/input.csv')\n" // the rare needle: in about 1% of cells
		}
		cell := ynotebook.Cell{ID: id, CellType: "code", Source: src, Outputs: []map[string]any{
			{"output_type": "stream", "name": "stdout", "text": lines(r, 4+r.IntN(6), 8, "INFO ")},
			{"output_type": "execute_result", "data": map[string]any{
				"text/plain": lines(r, 4, 6, "  "),
				"text/html":  "<table>" + lines(r, 4, 6, "<tr><td>") + "</table>",
			}},
		}}
		if c%10 == 3 {
			cell.Outputs = append(cell.Outputs, map[string]any{"output_type": "display_data", "data": map[string]any{"image/png": png, "text/plain": "<Figure size 640x480>"}})
		}
		if c%13 == 5 {
			cell.Outputs = append(cell.Outputs, map[string]any{"output_type": "error", "ename": "ValueError", "evalue": sentence(r, 5),
				"traceback": []any{lines(r, 4, 8, "  File ")}})
		}
		cells = append(cells, cell)
	}
	if edit > 0 {
		c := &cells[1+4*(edit%10)]
		c.Source += "# edit " + sentence(rand.New(rand.NewPCG(uint64(edit), 9)), 5) + "\n"
	}
	s := ynotebook.NewSnapshot(cells...)
	s.NBFormat, s.NBFormatMinor, s.Metadata = 4, 5, map[string]any{}
	return s
}

func benchPath(i int) string { return fmt.Sprintf("users/u%03d/analysis-%d.ipynb", i%100, i) }

var bench struct {
	once       sync.Once
	ix         *Index
	snaps      []*ynotebook.Snapshot // held, as the sidecar's rooms hold their notebooks
	jsonBytes  int                   // the notebooks' own size: their nbformat JSON
	snapBytes  int                   // the snapshots on the heap
	indexBytes int                   // what the index adds on the heap beside the snapshots
	aloneBytes int                   // what the index would hold were the snapshots dropped
	paths      []string
}

func heap() int {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int(m.HeapAlloc)
}

// benchIndex indexes the corpus once and measures the heap: the index's strings are
// the snapshots' own (a ynotebook snapshot is shared, not copied, until a cell
// changes), so what the index costs is what it adds beside the snapshots the rooms
// hold anyway; what it would hold alone is measured too.
func benchIndex(b *testing.B) *Index {
	bench.once.Do(func() {
		before := heap()
		for i := range benchNotebooks {
			snap := benchNotebook(i, 0)
			j, err := snap.JSON()
			if err != nil {
				b.Fatal(err)
			}
			bench.jsonBytes += len(j)
			bench.snaps = append(bench.snaps, snap)
			bench.paths = append(bench.paths, benchPath(i))
		}
		withSnaps := heap()
		bench.snapBytes = withSnaps - before
		bench.ix = NewIndex()
		for i, snap := range bench.snaps {
			bench.ix.Update(benchPath(i), snap, nil)
		}
		bench.indexBytes = heap() - withSnaps
		alone, start := NewIndex(), heap()
		for i := range benchNotebooks {
			alone.Update(benchPath(i), benchNotebook(i, 0), nil)
		}
		bench.aloneBytes = heap() - start
		runtime.KeepAlive(alone)
		slices.Sort(bench.paths)
	})
	return bench.ix
}

// writer edits one random notebook's cell every interval until stop, the way the
// extension's subscription does: a new snapshot, only the changed cell indexed again.
func writer(ix *Index, interval time.Duration, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(1, 1))
		t := time.NewTicker(interval)
		defer t.Stop()
		for edit := 1; ; edit++ {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			i := r.IntN(benchNotebooks)
			snap := benchNotebook(i, edit)
			ix.Update(benchPath(i), snap, &ynotebook.Changes{Cells: map[string]ynotebook.CellChange{
				snap.At(1 + 4*(edit%10)).ID: {Source: true}}})
		}
	}()
	return &wg
}

// scanSamples bounds the searches without the filter: they take up to the time bound.
const scanSamples = 30

// BenchmarkSearch: search_notebooks' search over 1,000 notebooks (about 50 MB) while a
// writer re-indexes an edited notebook every 10 ms, with the trigram filter (index) and
// without it (scan: every field read, as a search without an index must), side by side;
// p50/p99 per query (scan: at most scanSamples searches), index memory as a ratio of
// the notebooks' JSON.
//
//	go test -run '^$' -bench BenchmarkSearch -benchtime 300x ./sidecar/builtin/search/
func BenchmarkSearch(b *testing.B) {
	ix := benchIndex(b)
	b.Run("memory", func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(float64(bench.jsonBytes)/1e6, "notebooks-MB")
		b.ReportMetric(float64(bench.snapBytes)/1e6, "snapshots-MB")
		b.ReportMetric(float64(bench.indexBytes)/1e6, "index-MB")
		b.ReportMetric(float64(bench.indexBytes)/float64(bench.jsonBytes), "index/notebooks")
		b.ReportMetric(float64(bench.aloneBytes)/float64(bench.jsonBytes), "alone/notebooks")
	})
	queries := []struct {
		name  string
		q     string
		regex bool
	}{
		{"rare", "read_csv", false},             // about 1% of cells: the limit is not reached
		{"common", "import", false},             // most cells: the limit is reached at once
		{"phrase", "import numpy", false},       // two words that meet in few cells
		{"absent", "xylophone", false},          // nowhere: every notebook is searched
		{"regex", `read_(csv|parquet)\(`, true}, // required literal "read_"
		{"regex-absent", `(?i)quux\d+`, true},
	}
	for _, q := range queries {
		for _, mode := range []string{"index", "scan"} {
			b.Run(q.name+"/"+mode, func(b *testing.B) {
				cq, err := Compile(q.q, q.regex)
				if err != nil {
					b.Fatal(err)
				}
				if mode == "scan" {
					cq.grams, cq.lits = nil, nil
				}
				stop := make(chan struct{})
				wg := writer(ix, 10*time.Millisecond, stop)
				var lat []time.Duration
				hits, n := 0, b.N
				if mode == "scan" {
					n = min(n, scanSamples)
				}
				for range n {
					ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
					start := time.Now()
					r := ix.Search(ctx, cq, Options{Limit: DefaultLimit, Paths: bench.paths})
					lat = append(lat, time.Since(start))
					cancel()
					hits = len(r.Hits)
				}
				close(stop)
				wg.Wait()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1e3, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1e3, "p99-ms")
				b.ReportMetric(float64(hits), "hits")
			})
		}
	}
}
