package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// mcpClient is one MCP client of either era, Go or TypeScript.
type mcpClient interface {
	name() string
	bind(name, path string)
	subscribe(uris ...string)
	unsubscribe(uris ...string)
	read(uri string) string
	updates() <-chan string
	close()
}

const (
	nbName    = "analysis"
	nbURI     = "notebook://" + nbName
	preloaded = 200 // session steps in the store before the sidecar starts
	// delivery is a property, not a wait: the budget within which a committed change is
	// announced (docs/BENCHMARKS.md), the 2 s debounce ceiling (notifications.max_delay)
	// plus 500 ms for the tail and the fan-out. Waits for anything else use testenv.Wait.
	delivery = 2500 * time.Millisecond
)

// drain empties a client's notifications after quiet has passed without one. It is a
// bounded observation window, for want of a barrier: the server counts the
// notifications it sends over all sessions, not per session.
func drain(c mcpClient, quiet time.Duration) int {
	n := 0
	for {
		select {
		case <-c.updates():
			n++
		case <-time.After(quiet):
			return n
		}
	}
}

// awaitOK reports whether every uri in want was notified to c within the deadline.
func awaitOK(c mcpClient, within time.Duration, want ...string) bool {
	missing := map[string]bool{}
	for _, u := range want {
		missing[u] = true
	}
	deadline := time.After(within)
	for len(missing) > 0 {
		select {
		case u := <-c.updates():
			delete(missing, u)
		case <-deadline:
			return false
		}
	}
	return true
}

// await waits until every uri in want was notified to c.
func await(t *testing.T, c mcpClient, within time.Duration, want ...string) {
	t.Helper()
	if !awaitOK(c, within, want...) {
		t.Fatalf("%s: not notified of %v within %v", c.name(), want, within)
	}
}

// clients dials every client kind available: mcp-go on both eras, and the official
// TypeScript SDK clients when their npm packages are installed.
func clients(t *testing.T, sc *sidecar) []mcpClient {
	cs := []mcpClient{dialRaw(t, sc.mcpURL()), dialGo(t, sc.mcpURL(), false), dialGo(t, sc.mcpURL(), true)}
	return append(cs, dialTS(t, sc.mcpURL())...)
}

func jsonEqual(t *testing.T, what string, got string, want []byte) {
	t.Helper()
	if !jsonSame(got, want) {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
}

// eventuallyJSON waits until read returns want (as JSON values).
func eventuallyJSON(t *testing.T, what string, read func() string, want []byte) {
	t.Helper()
	var got string
	testenv.Eventually(t, testenv.Wait, what, func() bool { got = read(); return jsonSame(got, want) },
		func() string { return jsonDiff(got, want) })
}

// jsonDiff shows where got and want (compact JSON) first differ, with some context.
func jsonDiff(got string, want []byte) string {
	var g, w bytes.Buffer
	if json.Compact(&g, []byte(got)) != nil || json.Compact(&w, want) != nil {
		return fmt.Sprintf("got %.2000s\nwant %.2000s", got, want)
	}
	a, b := g.String(), w.String()
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(i-300, 0)
	return fmt.Sprintf("%d and %d bytes, first difference at byte %d:\n got …%.1500s\nwant …%.1500s", len(a), len(b), i, a[from:], b[from:])
}

// tryReadText returns a read of uri by g for eventuallyJSON: the text, or what went wrong.
func tryReadText(g *goClient, uri string) func() string {
	return func() string {
		text, err := g.tryRead(uri)
		if err != nil {
			return err.Error()
		}
		return text
	}
}

// jsonSame compares two JSON documents as values.
func jsonSame(got string, want []byte) bool {
	var a, b any
	return json.Unmarshal([]byte(got), &a) == nil && json.Unmarshal(want, &b) == nil && reflect.DeepEqual(a, b)
}

// TestEndToEnd drives the real binary with a pycrdt-store-like writer and MCP clients of
// both eras: an edit reaches every subscriber with the notebook and cell URIs and a read
// returns it; bursts of edits lose no notification; unsubscribing stops delivery;
// disconnecting cleans up; /metrics and /readyz tell the truth.
func TestEndToEnd(t *testing.T) {
	steps := session(t)
	dir := t.TempDir()
	w := startPreloaded(t, filepath.Join(dir, ".jupyter_ystore.db"), steps)
	sc := startSidecar(t, dir, options{})
	sc.waitHTTP("/readyz", http.StatusOK)
	baseGoroutines := sc.metric("go_goroutines")

	cs := clients(t, sc)
	for _, c := range cs {
		c.bind(nbName, nbPath)
	}
	next := preloaded

	t.Run("edit reaches every subscriber", func(t *testing.T) {
		i, cell := changedCell(steps, next)
		if i < 0 {
			t.Fatal("the session has no source edit after the preloaded steps")
		}
		for _, s := range steps[next:i] {
			w.write(s.update)
		}
		for _, c := range cs {
			c.subscribe(nbURI, cellURI(nbName, cell))
		}
		for _, c := range cs {
			drain(c, 700*time.Millisecond)
		}
		w.write(steps[i].update)
		for _, c := range cs {
			await(t, c, delivery, nbURI, cellURI(nbName, cell))
		}
		want, err := steps[i].after.JSON()
		if err != nil {
			t.Fatal(err)
		}
		wantCell, index, _ := steps[i].after.Cell(cell)
		for _, c := range cs {
			jsonEqual(t, c.name()+" notebook", c.read(nbURI), want)
			var got struct {
				ID     string `json:"id"`
				Index  int    `json:"index"`
				Source any    `json:"source"`
			}
			if err := json.Unmarshal([]byte(c.read(cellURI(nbName, cell))), &got); err != nil {
				t.Fatal(err)
			}
			if got.ID != cell || got.Index != index || joinSource(got.Source) != wantCell.Source {
				t.Fatalf("%s cell read = %+v, want id %s index %d source %q", c.name(), got, cell, index, wantCell.Source)
			}
			c.unsubscribe(cellURI(nbName, cell))
		}
		next = i + 1
	})

	t.Run("bursts lose no notification", func(t *testing.T) {
		const bursts, size = 40, 25
		for _, c := range cs {
			drain(c, 600*time.Millisecond)
		}
		extra, lost := map[string]int{}, map[string][]int{}
		for b := 0; b < bursts; b++ {
			burst := steps[next : next+size]
			next += size
			if !visible(burst) {
				t.Fatalf("burst %d changes nothing visible", b)
			}
			updates := make([][]byte, len(burst))
			for k, s := range burst {
				updates[k] = s.update
			}
			w.flood(updates)
			for _, c := range cs {
				if !awaitOK(c, delivery, nbURI) {
					lost[c.name()] = append(lost[c.name()], b)
				}
			}
			for _, c := range cs {
				extra[c.name()] += drain(c, 300*time.Millisecond)
			}
		}
		t.Logf("%d bursts of %d edits; extra notifications %v", bursts, size, extra)
		if len(lost) > 0 {
			t.Fatalf("bursts without a notification, per client: %v (sent %v, dropped %v)", lost,
				sc.metric("jupyter_mcp_sidecar_mcp_notifications_sent_total"), sc.metric("jupyter_mcp_sidecar_mcp_notifications_dropped_total"))
		}
	})

	t.Run("unsubscribe stops delivery", func(t *testing.T) {
		for _, c := range cs {
			c.unsubscribe(nbURI)
			drain(c, 600*time.Millisecond)
		}
		for _, s := range steps[next : next+5] {
			w.write(s.update)
		}
		next += 5
		for _, c := range cs {
			if n := drain(c, time.Second); n != 0 {
				t.Errorf("%s: %d notifications after unsubscribing", c.name(), n)
			}
		}
	})

	t.Run("metrics show the traffic", func(t *testing.T) {
		if v := sc.metric("jupyter_mcp_sidecar_rows_tailed_total"); v < float64(next) {
			t.Errorf("rows tailed = %v, want ≥ %d", v, next)
		}
		if v := sc.metric("jupyter_mcp_sidecar_mcp_notifications_sent_total"); v <= 0 {
			t.Errorf("notifications sent = %v", v)
		}
	})

	t.Run("a bound name follows its renamed notebook", func(t *testing.T) {
		c := dialGo(t, sc.mcpURL(), true)
		c.subscribe(nbURI)
		drain(c, 600*time.Millisecond)
		renameInFileIDDB(t, filepath.Join(dir, "file_id_manager.db"), filepath.Join(dir, "work", "final.ipynb"))
		await(t, c, testenv.Wait, nbURI)
		jsonEqual(t, "renamed notebook", c.read(nbURI), mustJSON(t, steps[next-1].after))
		c.close()
	})

	t.Run("disconnect cleans up", func(t *testing.T) {
		for _, c := range cs {
			c.close()
		}
		var extra []mcpClient
		for k := 0; k < 10; k++ {
			c := dialGo(t, sc.mcpURL(), k%2 == 0)
			c.subscribe(nbURI)
			extra = append(extra, c)
		}
		if v := sc.metric("jupyter_mcp_sidecar_mcp_subscriptions"); v < 10 {
			t.Fatalf("subscriptions with 10 clients = %v", v)
		}
		for _, c := range extra {
			c.close()
		}
		var subs, sessions, g float64
		testenv.Eventually(t, testenv.Wait, "subscriptions, sessions and goroutines back after disconnect", func() bool {
			m := sc.metrics("jupyter_mcp_sidecar_mcp_subscriptions", "jupyter_mcp_sidecar_mcp_sessions", "go_goroutines")
			subs, sessions, g = m[0], m[1], m[2]
			return subs == 0 && sessions == 0 && g <= baseGoroutines+2
		}, func() string {
			return fmt.Sprintf("subscriptions %v, sessions %v, goroutines %v (baseline %v)", subs, sessions, g, baseGoroutines)
		})
		t.Logf("after disconnect: subscriptions %v, sessions %v, goroutines %v (baseline %v)", subs, sessions, g, baseGoroutines)
	})

	t.Run("readyz follows the store", func(t *testing.T) {
		w.do(map[string]any{"op": "delete"})
		sc.waitHTTP("/readyz", http.StatusServiceUnavailable)
		w.do(map[string]any{"op": "open"})
		w.write(steps[next].update)
		sc.waitHTTP("/readyz", http.StatusOK)
	})

	t.Run("a corrupt row degrades only its room", func(t *testing.T) {
		const bad = ".notebook:9d1c7a52-0000-4000-8000-000000000bad.y"
		w.do(map[string]any{"op": "write", "room": bad, "update": base64.StdEncoding.EncodeToString([]byte{1, 1, 0xff, 0xff, 0xff})})
		body := sc.waitHTTP("/readyz", http.StatusServiceUnavailable)
		var r struct {
			Degraded []string `json:"degraded_rooms"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Degraded) != 1 || r.Degraded[0] != bad {
			t.Fatalf("readyz = %s, want the corrupt room degraded", body)
		}
		if v := sc.metric("jupyter_mcp_sidecar_decode_errors_total"); v != 1 {
			t.Fatalf("decode errors = %v, want 1", v)
		}
		// The store was recreated above: the notebook's whole history goes into the new one.
		c := dialGo(t, sc.mcpURL(), true)
		c.subscribe(nbURI)
		var history [][]byte
		for _, s := range steps[:next+2] {
			history = append(history, s.update)
		}
		w.flood(history)
		await(t, c, testenv.Wait, nbURI)
		eventuallyJSON(t, "notebook beside a degraded room", func() string { return c.read(nbURI) }, mustJSON(t, steps[next+1].after))
	})
}

func mustJSON(t *testing.T, s interface{ JSON() ([]byte, error) }) []byte {
	t.Helper()
	b, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// joinSource reads an nbformat source: a string or a list of lines.
func joinSource(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case []any:
		out := ""
		for _, line := range s {
			str, _ := line.(string)
			out += str
		}
		return out
	}
	return ""
}
