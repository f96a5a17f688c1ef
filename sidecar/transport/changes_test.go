//lint:file-ignore SA1019 the 2025-11-25 era (resources/subscribe, the GET stream) is served and tested on purpose; mcp-go deprecates its client API

package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/changestest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// roomsLibrary is the sidecar's own library, a rooms.Set, fed the fixture's updates as
// store rows of one room at testPath; what it applies is told to the server at once.
type roomsLibrary struct {
	*rooms.Set
	w   *rooms.Writer
	fx  fixture
	key string

	mu  sync.Mutex
	srv *resources.Server
	row int64
}

// newRoomsLibrary loads the fixture's initial notebook into a room of the given scope
// (a hub user, "" for none).
func newRoomsLibrary(t testing.TB, scope string) *roomsLibrary {
	t.Helper()
	fx := loadFixture(t)
	l := roomsOf(t, scope, fx.Initial)
	l.fx = fx
	return l
}

// roomsOf loads the notebook of the base64 update initial into a room of scope.
func roomsOf(t testing.TB, scope, initial string) *roomsLibrary {
	t.Helper()
	l := &roomsLibrary{Set: rooms.New(rooms.Config{Scope: scope}), key: "json:notebook:" + testPath}
	l.w = l.Writer(l)
	l.rows(t, ystore.EventReset, initial)
	return l
}

func (l *roomsLibrary) serve(srv *resources.Server) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.srv = srv
}

func (l *roomsLibrary) Changed(path string, ch ynotebook.Changes, o rooms.Origin) {
	l.mu.Lock()
	srv := l.srv
	l.mu.Unlock()
	if srv != nil {
		srv.NotebookChanged(path, ch, publish.Origin{Room: o.Room.Key})
	}
}

func (l *roomsLibrary) Moved(string, string, rooms.Origin) {}

// rows hands the store rows of the base64 updates to the rooms.
func (l *roomsLibrary) rows(t testing.TB, kind ystore.EventKind, updates ...string) {
	t.Helper()
	ev := ystore.Event{Kind: kind, Room: l.key}
	for _, u := range updates {
		l.row++
		ev.Rows = append(ev.Rows, ystore.Row{Room: l.key, ID: l.row, Update: mustB64(t, u), Timestamp: float64(time.Now().UnixMicro()) / 1e6})
	}
	if err := l.w.Sink(context.Background(), []ystore.Event{ev}); err != nil {
		t.Fatal(err)
	}
}

// edit applies the fixture edit called name.
func (l *roomsLibrary) edit(t testing.TB, name string) {
	t.Helper()
	for _, e := range l.fx.Edits {
		if e.Name == name {
			l.rows(t, ystore.EventUpdates, e.Update)
			return
		}
	}
	t.Fatalf("no edit %q", name)
}

// readVersioned reads uri and returns its text and the version in its _meta.
func readVersioned(t testing.TB, c *goClient, uri string) (string, string) {
	t.Helper()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := c.ReadResource(context.Background(), req)
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	var text string
	var meta map[string]any
	switch r := res.Contents[0].(type) {
	case mcp.TextResourceContents:
		text, meta = r.Text, r.Meta
	case mcp.BlobResourceContents:
		text, meta = r.Blob, r.Meta
	}
	v, _ := meta[resources.VersionKey].(string)
	return text, v
}

func changesURI(since string) string {
	return "notebook://work/changes?since=" + url.QueryEscape(since)
}

// TestAgentLoop is the agent's loop of the README against the sidecar's rooms, with
// clients of both eras: read, hear, ask what changed, apply. After each notification
// the changes since the last version, applied to the last read, equal a fresh read, an
// answer the server made before it announced the change (counted as cached); the
// notification, the reads of the notebook, a cell and an output carry the version.
func TestAgentLoop(t *testing.T) {
	for _, modern := range []bool{false, true} {
		t.Run(map[bool]string{false: era20251125, true: era20260728}[modern], func(t *testing.T) {
			lib := newRoomsLibrary(t, "")
			reg := prometheus.NewRegistry()
			r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}, Registerer: reg}, lib)
			lib.serve(r.srv)
			c := dialGo(t, r.url, modern)
			if modern {
				stop, err := c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: []string{"notebook://work"}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(stop)
				testenv.Eventually(t, testenv.Wait, "the listen stream registered", func() bool { n, _, _ := stats(r); return n[era20260728] == 1 })
			} else {
				sub := mcp.SubscribeRequest{}
				sub.Params.URI = "notebook://work"
				if err := c.Subscribe(context.Background(), sub); err != nil {
					t.Fatal(err)
				}
			}
			last, version := readVersioned(t, c, "notebook://work")
			if version == "" {
				t.Fatal("a notebook read carries no version")
			}
			for _, e := range lib.fx.Edits {
				lib.edit(t, e.Name)
				heard := c.waitVersion(t, "notebook://work")
				fresh, now := readVersioned(t, c, "notebook://work")
				if heard != now || now == version {
					t.Fatalf("%s: notification says version %s, a read %s (before: %s)", e.Name, heard, now, version)
				}
				body, v := readVersioned(t, c, changesURI(version))
				a, err := changestest.Decode([]byte(body))
				if err != nil {
					t.Fatal(err)
				}
				if v != now || a.Version != now || a.Since != version {
					t.Fatalf("%s: changes answer of version %s (meta %s) since %s; want %s since %s", e.Name, a.Version, v, a.Since, now, version)
				}
				got, err := changestest.Apply([]byte(last), a)
				if err != nil {
					t.Fatalf("%s: %v: %s", e.Name, err, body)
				}
				want, _ := changestest.Canonical([]byte(fresh))
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: changes applied:\n%s\nfresh read:\n%s", e.Name, got, want)
				}
				last, version = fresh, now
			}
			for _, uri := range []string{"notebook://work/cells/c1", "notebook://work/cells/c1/outputs/0"} {
				if _, v := readVersioned(t, c, uri); v != version {
					t.Fatalf("%s read with version %q, want the notebook's %s", uri, v, version)
				}
			}
			if n := testenv.Sum(testenv.Gather(t, reg), "jupyter_mcp_sidecar_mcp_changes_reads_total", "outcome", "cached"); n != float64(len(lib.fx.Edits)) {
				t.Fatalf("%v changes reads after a notification found their answer made, want all %d", n, len(lib.fx.Edits))
			}
			body, _ := readVersioned(t, c, changesURI(version))
			if a, _ := changestest.Decode([]byte(body)); a.Status != "ok" || len(a.Added)+len(a.Removed)+len(a.Moved)+len(a.Changed) != 0 || a.Notebook != nil {
				t.Fatalf("changes since the current version are not empty: %s", body)
			}
		})
	}
}

// waitVersion waits for resources/updated of uri and returns the version in its _meta.
func (c *goClient) waitVersion(t testing.TB, uri string) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case n := <-c.got:
			if n.Method != string(mcp.MethodNotificationResourceUpdated) || n.Params.AdditionalFields["uri"] != uri {
				continue
			}
			v, _ := n.Params.Meta[resources.VersionKey].(string)
			if v == "" {
				t.Fatalf("resources/updated of %s without a version: %+v", uri, n.Params)
			}
			return v
		case <-deadline:
			t.Fatalf("no resources/updated for %s", uri)
		}
	}
}

// TestChangesAdversarial: whatever since a client sends (forged, huge, negative,
// malformed, another room's, another hub user's), the answer is read_notebook with the
// current version and nothing else of any notebook; a flood of reads is answered from
// one answer; a gate that withholds the notebook withholds what changed in it.
func TestChangesAdversarial(t *testing.T) {
	lib := newRoomsLibrary(t, "bob")
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}}, lib)
	lib.serve(r.srv)
	c := dialGo(t, r.url, true)
	_, current := readVersioned(t, c, "notebook://work")

	// The same notebook in another room, and in the same room of another hub user.
	other := newRoomsLibrary(t, "bob")
	other.key = "json:notebook:other/analysis.ipynb"
	other.rows(t, ystore.EventReset, other.fx.Initial)
	otherRoom, err := other.Served("other/analysis.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	alice := newRoomsLibrary(t, "alice")
	alices, err := alice.Served(testPath)
	if err != nil {
		t.Fatal(err)
	}
	if alices.Version == current || otherRoom.Version == current {
		t.Fatal("another user's or room's version of the same content equals this one's")
	}
	forged := "v1." + strings.Repeat("A", 22)
	tests := []struct {
		name, uri, reason string
	}{
		{"forged", changesURI(forged), "unknown_version"},
		{"another room's", changesURI(otherRoom.Version), "unknown_version"},
		{"another hub user's", changesURI(alices.Version), "unknown_version"},
		{"negative", changesURI("-1"), "malformed_version"},
		{"long", changesURI(strings.Repeat("v1.", 600)), "malformed_version"},
		{"empty", changesURI(""), "malformed_version"},
		{"none", "notebook://work/changes", "malformed_version"},
		{"escaped slash", "notebook://work/changes?since=v1.%2F%2F", "malformed_version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, v := readVersioned(t, c, tt.uri)
			var a map[string]any
			if err := json.Unmarshal([]byte(body), &a); err != nil {
				t.Fatal(err)
			}
			if a["status"] != "read_notebook" || a["reason"] != tt.reason || a["version"] != current || v != current {
				t.Fatalf("answer %s (meta version %s); want read_notebook, %s, version %s", body, v, tt.reason, current)
			}
			for k := range a {
				switch k {
				case "uri", "version", "since", "status", "reason", "cells":
				default:
					t.Fatalf("answer holds %q: %s", k, body)
				}
			}
			if len(body) > 512 {
				t.Fatalf("a read_notebook answer of %d bytes", len(body))
			}
		})
	}

	// A flood of the same read: one answer made, the others served from it.
	lib.edit(t, "source-c1")
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	for range 200 {
		wg.Go(func() {
			req := mcp.ReadResourceRequest{}
			req.Params.URI = changesURI(current)
			res, err := c.ReadResource(context.Background(), req)
			if err != nil {
				errs <- err.Error()
				return
			}
			if text := res.Contents[0].(mcp.TextResourceContents).Text; !strings.Contains(text, `"status":"ok"`) {
				errs <- text
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("flood: %s", e)
	}

	t.Run("withheld with the notebook", func(t *testing.T) {
		r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath},
			Gate: resources.Seam{Name: "withhold", Options: map[string]any{"templates": []any{"notebook://{name}"}}}}, lib)
		c := dialGo(t, r.url, true)
		req := mcp.ReadResourceRequest{}
		req.Params.URI = changesURI(current)
		_, err := c.ReadResource(context.Background(), req)
		if err == nil || !strings.Contains(err.Error(), "withheld") {
			t.Fatalf("changes of a withheld notebook: %v", err)
		}
	})
}

// TestResume: a listen stream (2026-07-28) or a subscription (2025-11-25) that names the
// version last heard of a resource is told at once when the notebook is at another
// version now, after the acknowledgement; naming the current one is told nothing until
// the next change.
func TestResume(t *testing.T) {
	lib := newRoomsLibrary(t, "")
	r, p := startStdio(t, served{Config: resources.Config{Notebooks: map[string]string{"work": testPath}}}, lib)
	lib.serve(r.srv)
	read := func(id int) string {
		p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"uri":"notebook://work"}}`, id))
		m := p.await(t, byID(float64(id)))
		res, _ := m["result"].(map[string]any)
		contents, _ := res["contents"].([]any)
		first, _ := contents[0].(map[string]any)
		meta, _ := first["_meta"].(map[string]any)
		v, _ := meta[resources.VersionKey].(string)
		return v
	}
	versionOf := func(m map[string]any) string {
		params, _ := m["params"].(map[string]any)
		meta, _ := params["_meta"].(map[string]any)
		v, _ := meta[resources.VersionKey].(string)
		return v
	}
	old := read(1)
	lib.edit(t, "source-c1")
	now := read(2)
	if old == now {
		t.Fatal("an edit left the version as it was")
	}
	listen := func(id int, heard string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{},%q:{"notebook://work":%q}},"notifications":{"resourceSubscriptions":["notebook://work"]}}}`, id, resources.VersionsKey, heard)
	}
	t.Run(era20260728, func(t *testing.T) {
		p.send(t, listen(10, old))
		ack := p.await(t, func(m map[string]any) bool {
			return m["method"] == "notifications/subscriptions/acknowledged" || m["method"] == "notifications/resources/updated"
		})
		if ack["method"] != "notifications/subscriptions/acknowledged" {
			t.Fatalf("the stream began with %v", ack)
		}
		if m := p.await(t, updated("notebook://work")); versionOf(m) != now {
			t.Fatalf("resumed with version %s: told %v, want version %s", old, m, now)
		}
		p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":10}}`)
		p.await(t, byID(10))

		p.send(t, listen(11, now))
		p.await(t, func(m map[string]any) bool { return m["method"] == "notifications/subscriptions/acknowledged" })
		lib.edit(t, "add-c5")
		m := p.await(t, updated("notebook://work"))
		if next := read(12); versionOf(m) != next || next == now {
			t.Fatalf("resumed at the current version %s, then an edit: first told %v, want version %s", now, m, next)
		}
		p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":11}}`)
		p.await(t, byID(11))
		now = read(13)
	})
	t.Run(era20251125, func(t *testing.T) {
		p.send(t, `{"jsonrpc":"2.0","id":20,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		p.await(t, byID(20))
		p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":21,"method":"resources/subscribe","params":{"uri":"notebook://work","_meta":{%q:%q}}}`, resources.VersionKey, old))
		if m := p.await(t, updated("notebook://work")); versionOf(m) != now {
			t.Fatalf("subscribed with version %s: told %v, want version %s", old, m, now)
		}
	})
}

// TestHugeReadURIRefused: a resources/read of a URI over max_uri_bytes is refused before
// the SDK matches it against the templates, which takes seconds of CPU for a URI of a
// few hundred kilobytes; a changes URI with a huge since is refused the same way.
func TestHugeReadURIRefused(t *testing.T) {
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}}, newLibrary(t, testPath))
	for _, modern := range []bool{false, true} {
		c := dialGo(t, r.url, modern)
		for _, uri := range []string{"notebook://work/cells/" + strings.Repeat("x", 300_000), changesURI(strings.Repeat("v", 300_000))} {
			req := mcp.ReadResourceRequest{}
			req.Params.URI = uri
			start := time.Now()
			_, err := c.ReadResource(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), "at most 2048") {
				t.Fatalf("read of a %d-byte URI: %.200v, after %v", len(uri), err, time.Since(start))
			}
		}
	}
}

// TestResumeHTTP: the README's resume over Streamable HTTP, as curl sends it: a listen
// stream naming an older version of the notebook it listens to hears, after the
// acknowledgement, the notebook at its version now, the subscription id and the
// version in one _meta.
func TestResumeHTTP(t *testing.T) {
	lib := newRoomsLibrary(t, "")
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}}, lib)
	lib.serve(r.srv)
	old, err := lib.Served(testPath)
	if err != nil {
		t.Fatal(err)
	}
	lib.edit(t, "source-c1")
	now, err := lib.Served(testPath)
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{"Authorization": "Bearer " + testToken, "MCP-Protocol-Version": era20260728, "Mcp-Method": "subscriptions/listen"}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{},%q:{"notebook://work":%q}},"notifications":{"resourceSubscriptions":["notebook://work"]}}}`,
		resources.VersionsKey, old.Version)
	resp := post(t, r.url, "", headers, body)
	defer resp.Body.Close()
	cut := time.AfterFunc(testenv.Wait, func() { resp.Body.Close() }) // nothing heard: fail, not hang
	defer cut.Stop()
	sc := bufio.NewScanner(resp.Body)
	var msgs []string
	for len(msgs) < 2 && sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			msgs = append(msgs, data)
		}
	}
	want := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"notebook://work","_meta":{%q:%q,"io.modelcontextprotocol/subscriptionId":5}}}`, resources.VersionKey, now.Version)
	if len(msgs) < 2 || !strings.Contains(msgs[0], "notifications/subscriptions/acknowledged") || msgs[1] != want {
		t.Fatalf("the resumed stream began with\n%q\nwant the acknowledgement, then\n%s", msgs, want)
	}
}
