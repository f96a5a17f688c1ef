package mcp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// TestEndToEnd drives the real binary with a pycrdt-store-like writer and MCP clients of
// both eras: an edit reaches every subscriber with the notebook and cell URIs and a read
// returns it; bursts of edits lose no notification; unsubscribing stops delivery;
// disconnecting cleans up; /metrics and /readyz tell the truth.
func TestEndToEnd(t *testing.T) {
	steps := sidecartest.Session(t)
	dir := t.TempDir()
	w := sidecartest.StartPreloaded(t, filepath.Join(dir, ".jupyter_ystore.db"), steps)
	sc := sidecartest.StartSidecar(t, dir, sidecartest.Options{})
	sc.WaitHTTP("/readyz", http.StatusOK)
	baseGoroutines := sc.Metric("go_goroutines")

	cs := sidecartest.Clients(t, sc)
	for _, c := range cs {
		c.Bind(sidecartest.NbName, sidecartest.NbPath)
	}
	next := sidecartest.Preloaded

	t.Run("edit reaches every subscriber", func(t *testing.T) {
		i, cell := sidecartest.ChangedCell(steps, next)
		if i < 0 {
			t.Fatal("the session has no source edit after the preloaded steps")
		}
		for _, s := range steps[next:i] {
			w.Write(s.Update)
		}
		for _, c := range cs {
			c.Subscribe(sidecartest.NbURI, sidecartest.CellURI(sidecartest.NbName, cell))
		}
		for _, c := range cs {
			sidecartest.Drain(c, 700*time.Millisecond)
		}
		w.Write(steps[i].Update)
		for _, c := range cs {
			sidecartest.Await(t, c, sidecartest.Delivery, sidecartest.NbURI, sidecartest.CellURI(sidecartest.NbName, cell))
		}
		want, err := steps[i].After.JSON()
		if err != nil {
			t.Fatal(err)
		}
		wantCell, index, _ := steps[i].After.Cell(cell)
		for _, c := range cs {
			sidecartest.JSONEqual(t, c.Name()+" notebook", c.Read(sidecartest.NbURI), want)
			var got struct {
				ID     string `json:"id"`
				Index  int    `json:"index"`
				Source any    `json:"source"`
			}
			if err := json.Unmarshal([]byte(c.Read(sidecartest.CellURI(sidecartest.NbName, cell))), &got); err != nil {
				t.Fatal(err)
			}
			if got.ID != cell || got.Index != index || sidecartest.JoinSource(got.Source) != wantCell.Source {
				t.Fatalf("%s cell read = %+v, want id %s index %d source %q", c.Name(), got, cell, index, wantCell.Source)
			}
			c.Unsubscribe(sidecartest.CellURI(sidecartest.NbName, cell))
		}
		next = i + 1
	})

	t.Run("bursts lose no notification", func(t *testing.T) {
		const bursts, size = 40, 25
		for _, c := range cs {
			sidecartest.Drain(c, 600*time.Millisecond)
		}
		extra, lost := map[string]int{}, map[string][]int{}
		for b := 0; b < bursts; b++ {
			burst := steps[next : next+size]
			next += size
			if !sidecartest.Visible(burst) {
				t.Fatalf("burst %d changes nothing visible", b)
			}
			updates := make([][]byte, len(burst))
			for k, s := range burst {
				updates[k] = s.Update
			}
			w.Flood(updates)
			for _, c := range cs {
				if !sidecartest.AwaitOK(c, sidecartest.Delivery, sidecartest.NbURI) {
					lost[c.Name()] = append(lost[c.Name()], b)
				}
			}
			for _, c := range cs {
				extra[c.Name()] += sidecartest.Drain(c, 300*time.Millisecond)
			}
		}
		t.Logf("%d bursts of %d edits; extra notifications %v", bursts, size, extra)
		if len(lost) > 0 {
			t.Fatalf("bursts without a notification, per client: %v (sent %v, dropped %v)", lost,
				sc.Metric("jupyter_mcp_sidecar_mcp_notifications_sent_total"), sc.Metric("jupyter_mcp_sidecar_mcp_notifications_dropped_total"))
		}
	})

	t.Run("unsubscribe stops delivery", func(t *testing.T) {
		for _, c := range cs {
			c.Unsubscribe(sidecartest.NbURI)
			sidecartest.Drain(c, 600*time.Millisecond)
		}
		for _, s := range steps[next : next+5] {
			w.Write(s.Update)
		}
		next += 5
		for _, c := range cs {
			if n := sidecartest.Drain(c, time.Second); n != 0 {
				t.Errorf("%s: %d notifications after unsubscribing", c.Name(), n)
			}
		}
	})

	t.Run("metrics show the traffic", func(t *testing.T) {
		if v := sc.Metric("jupyter_mcp_sidecar_rows_tailed_total"); v < float64(next) {
			t.Errorf("rows tailed = %v, want ≥ %d", v, next)
		}
		if v := sc.Metric("jupyter_mcp_sidecar_mcp_notifications_sent_total"); v <= 0 {
			t.Errorf("notifications sent = %v", v)
		}
	})

	t.Run("a bound name follows its renamed notebook", func(t *testing.T) {
		c := sidecartest.DialGo(t, sc.MCPURL(), true)
		c.Subscribe(sidecartest.NbURI)
		sidecartest.Drain(c, 600*time.Millisecond)
		sidecartest.RenameInFileIDDB(t, filepath.Join(dir, "file_id_manager.db"), filepath.Join(dir, "work", "final.ipynb"))
		sidecartest.Await(t, c, testenv.Wait, sidecartest.NbURI)
		sidecartest.JSONEqual(t, "renamed notebook", c.Read(sidecartest.NbURI), sidecartest.MustJSON(t, steps[next-1].After))
		c.Close()
	})

	t.Run("disconnect cleans up", func(t *testing.T) {
		for _, c := range cs {
			c.Close()
		}
		var extra []sidecartest.MCPClient
		for k := 0; k < 10; k++ {
			c := sidecartest.DialGo(t, sc.MCPURL(), k%2 == 0)
			c.Subscribe(sidecartest.NbURI)
			extra = append(extra, c)
		}
		if v := sc.Metric("jupyter_mcp_sidecar_mcp_subscriptions"); v < 10 {
			t.Fatalf("subscriptions with 10 clients = %v", v)
		}
		for _, c := range extra {
			c.Close()
		}
		var subs, sessions, g float64
		testenv.Eventually(t, testenv.Wait, "subscriptions, sessions and goroutines back after disconnect", func() bool {
			m := sc.Metrics("jupyter_mcp_sidecar_mcp_subscriptions", "jupyter_mcp_sidecar_mcp_sessions", "go_goroutines")
			subs, sessions, g = m[0], m[1], m[2]
			return subs == 0 && sessions == 0 && g <= baseGoroutines+2
		}, func() string {
			return fmt.Sprintf("subscriptions %v, sessions %v, goroutines %v (baseline %v)", subs, sessions, g, baseGoroutines)
		})
		t.Logf("after disconnect: subscriptions %v, sessions %v, goroutines %v (baseline %v)", subs, sessions, g, baseGoroutines)
	})

	t.Run("readyz follows the store", func(t *testing.T) {
		w.Send(map[string]any{"op": "delete"})
		sc.WaitHTTP("/readyz", http.StatusServiceUnavailable)
		w.Send(map[string]any{"op": "open"})
		w.Write(steps[next].Update)
		sc.WaitHTTP("/readyz", http.StatusOK)
	})

	t.Run("a corrupt row degrades only its room", func(t *testing.T) {
		const bad = ".notebook:9d1c7a52-0000-4000-8000-000000000bad.y"
		w.Send(map[string]any{"op": "write", "room": bad, "update": base64.StdEncoding.EncodeToString([]byte{1, 1, 0xff, 0xff, 0xff})})
		body := sc.WaitHTTP("/readyz", http.StatusServiceUnavailable)
		var r struct {
			Degraded []string `json:"degraded_rooms"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Degraded) != 1 || r.Degraded[0] != bad {
			t.Fatalf("readyz = %s, want the corrupt room degraded", body)
		}
		if v := sc.Metric("jupyter_mcp_sidecar_decode_errors_total"); v != 1 {
			t.Fatalf("decode errors = %v, want 1", v)
		}
		// The store was recreated above: the notebook's whole history goes into the new one.
		c := sidecartest.DialGo(t, sc.MCPURL(), true)
		c.Subscribe(sidecartest.NbURI)
		var history [][]byte
		for _, s := range steps[:next+2] {
			history = append(history, s.Update)
		}
		w.Flood(history)
		sidecartest.Await(t, c, testenv.Wait, sidecartest.NbURI)
		sidecartest.EventuallyJSON(t, "notebook beside a degraded room", func() string { return c.Read(sidecartest.NbURI) }, sidecartest.MustJSON(t, steps[next+1].After))
	})
}
