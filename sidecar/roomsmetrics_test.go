package sidecar

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

// The rooms count on the sidecar's collectors: rows applied and skipped, rooms held and
// degraded, a degraded room rebuilt without its bad row healthy again.
func TestRoomsMetrics(t *testing.T) {
	const key = ".notebook:n.ipynb.y"
	updates := ysessions.Load(t, "s0002.json.gz").UpdateBytes()
	rows := func(bad bool) []ystore.Row {
		out := make([]ystore.Row, len(updates))
		for i, u := range updates {
			out[i] = ystore.Row{Room: key, ID: int64(i + 1), Update: u}
		}
		if bad {
			out = append(out, ystore.Row{Room: key, ID: 999, Update: []byte{0x01, 0xff, 0xff}})
		}
		return out
	}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rm := &roomsMetrics{m: m}
	w := rooms.New(rooms.Config{Metrics: rm}).Writer(nil)
	check := func(what string, applied, decodeErrors, degraded float64) {
		t.Helper()
		got := []float64{testutil.ToFloat64(m.rowsApplied), testutil.ToFloat64(m.decodeErrors),
			testutil.ToFloat64(m.liveRooms), testutil.ToFloat64(m.degradedRooms)}
		if want := []float64{applied, decodeErrors, 1, degraded}; !slices.Equal(got, want) {
			t.Fatalf("%s: rows applied, decode errors, live rooms, degraded rooms = %v, want %v", what, got, want)
		}
	}
	n := float64(len(updates))
	if err := w.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventReset, Room: key, Rows: rows(true)}}); err != nil {
		t.Fatal(err)
	}
	check("loaded with a bad row", n, 1, 1)
	if err := w.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventUpdates, Room: key, Rows: rows(false)[:1]}}); err != nil {
		t.Fatal(err)
	}
	check("one more row", n+1, 1, 1)
	if err := w.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventReset, Room: key, Rows: rows(false)}}); err != nil {
		t.Fatal(err)
	}
	check("rebuilt without it", 2*n+1, 1, 0)
	if err := w.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventReset, Room: key, Rows: rows(true)}}); err != nil {
		t.Fatal(err)
	}
	rm.release() // the instance closed: its rooms leave the shared gauges
	if live, degraded := testutil.ToFloat64(m.liveRooms), testutil.ToFloat64(m.degradedRooms); live != 0 || degraded != 0 {
		t.Fatalf("released: live rooms %v, degraded rooms %v; want 0", live, degraded)
	}
}
