package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/outline"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// outlineJSON is the outline the extension serves for the notebook after a step.
func outlineJSON(t *testing.T, snap *ynotebook.Snapshot) []byte {
	b, err := json.Marshal(outline.Of(sidecartest.NbName, sidecartest.NbPath, snap))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// structuralStep returns the first step at or after from whose outline differs from
// the one before when want, or that types in an existing code cell, leaving the
// outline as it was, when !want.
func outlineStep(t *testing.T, steps []sidecartest.Step, from int, want bool) int {
	for i := max(from, 1); i < len(steps); i++ {
		ch := steps[i].Changes
		changed := string(outlineJSON(t, steps[i-1].After)) != string(outlineJSON(t, steps[i].After))
		if want && changed && len(ch.Added) > 0 {
			return i
		}
		if !want && !changed && len(ch.Added)+len(ch.Removed)+len(ch.Moved) == 0 && len(ch.Cells) == 1 {
			for id, cc := range ch.Cells {
				if c, _, ok := steps[i-1].After.Cell(id); ok && cc.Source && c.CellType == "code" {
					return i
				}
			}
		}
	}
	t.Fatalf("the session has no step from %d that %s", from, map[bool]string{true: "inserts a cell", false: "types in a code cell"}[want])
	return -1
}

// novelText returns a piece of the source of a cell changed by step i that no
// source of the notebook before it contains (case-insensitively), and the cell.
func novelText(steps []sidecartest.Step, i int) (string, string) {
	var before strings.Builder
	for _, c := range steps[i-1].After.All() {
		before.WriteString(strings.ToLower(c.Source) + "\x00")
	}
	for id, cc := range steps[i].Changes.Cells {
		c, _, ok := steps[i].After.Cell(id)
		if !ok || !cc.Source {
			continue
		}
		src := c.Source
		for n := 10; n >= 5; n-- {
			for k := len(src) - n; k >= 0; k-- {
				w := src[k : k+n]
				if !strings.ContainsAny(w, "\n\r") && strings.TrimSpace(w) == w && !strings.Contains(before.String(), strings.ToLower(w)) {
					return w, id
				}
			}
		}
	}
	return "", ""
}

// preloadedSidecar stores the session's first preloaded steps and starts the binary
// bin on them, ready; it returns the writer for the rest.
func preloadedSidecar(t *testing.T, bin string, o sidecartest.Options) (*sidecartest.Sidecar, sidecartest.Writer, []sidecartest.Step) {
	t.Helper()
	steps := sidecartest.Session(t)
	dir := t.TempDir()
	w := sidecartest.StartPreloaded(t, filepath.Join(dir, ".jupyter_ystore.db"), steps)
	var sc *sidecartest.Sidecar
	withBinary(bin, func() { sc = sidecartest.StartSidecar(t, dir, o) })
	sc.WaitHTTP("/readyz", http.StatusOK)
	return sc, w, steps
}

// TestExtensionsOutlineAndSearch drives the two extensions every build has: the
// outline changes on a cell insert and not on typing; search_notebooks finds text
// the live writer typed once the debounce has flushed.
func TestExtensionsOutlineAndSearch(t *testing.T) {
	sc, w, steps := preloadedSidecar(t, sidecartest.Binary, sidecartest.Options{})
	cs := []*sidecartest.GoClient{sidecartest.DialGo(t, sc.MCPURL(), false), sidecartest.DialGo(t, sc.MCPURL(), true)}
	cs[0].Bind(sidecartest.NbName, sidecartest.NbPath)
	outlineURI := outline.URI(sidecartest.NbName)
	next := sidecartest.Preloaded

	t.Run("outline", func(t *testing.T) {
		sidecartest.JSONEqual(t, "outline", cs[0].Read(outlineURI), outlineJSON(t, steps[next-1].After))
		for _, c := range cs {
			c.Subscribe(outlineURI)
		}
		typing := outlineStep(t, steps, next, false)
		for _, s := range steps[next:typing] {
			w.Write(s.Update)
		}
		// Barrier: the sidecar serves every step before the typing, then what those
		// steps were told has arrived.
		sidecartest.EventuallyJSON(t, "notebook before the typing", sidecartest.TryReadText(cs[1], sidecartest.NbURI), sidecartest.MustJSON(t, steps[typing-1].After))
		for _, c := range cs {
			sidecartest.Drain(c, 700*time.Millisecond)
		}
		w.Write(steps[typing].Update)
		for _, c := range cs {
			if n := sidecartest.Drain(c, 1500*time.Millisecond); n != 0 {
				t.Errorf("%s: %d outline notifications for typing in a code cell (step %d)", c.Name(), n, typing)
			}
		}
		insert := outlineStep(t, steps, typing+1, true)
		for _, s := range steps[typing+1 : insert] {
			w.Write(s.Update)
		}
		sidecartest.EventuallyJSON(t, "notebook before the insert", sidecartest.TryReadText(cs[1], sidecartest.NbURI), sidecartest.MustJSON(t, steps[insert-1].After))
		for _, c := range cs {
			sidecartest.Drain(c, 700*time.Millisecond)
		}
		w.Write(steps[insert].Update)
		for _, c := range cs {
			sidecartest.Await(t, c, testenv.Wait, outlineURI)
		}
		// Told; the read shows the insert once the sidecar has applied it (a notification
		// of the steps before may still arrive after the barrier on a starved machine).
		sidecartest.EventuallyJSON(t, "outline after the insert", sidecartest.TryReadText(cs[1], outlineURI), outlineJSON(t, steps[insert].After))
		next = insert + 1
	})

	t.Run("search finds what the writer typed", func(t *testing.T) {
		i, query, cell := next, "", ""
		for ; i < len(steps) && query == ""; i++ {
			query, cell = novelText(steps, i)
		}
		i--
		if query == "" {
			t.Fatal("the session types nothing new after the outline steps")
		}
		for _, s := range steps[next:i] {
			w.Write(s.Update)
		}
		search := func() []string {
			var r struct{ Results []struct{ URI string } }
			if err := json.Unmarshal([]byte(cs[1].CallTool("search_notebooks", map[string]any{"query": query, "in": "source"})), &r); err != nil {
				t.Fatal(err)
			}
			var uris []string
			for _, h := range r.Results {
				uris = append(uris, h.URI)
			}
			return uris
		}
		if got := search(); len(got) != 0 {
			t.Fatalf("%q found before it was typed: %v", query, got)
		}
		committed := w.Write(steps[i].Update)
		// The delivery budget is the property: found within it of the commit.
		testenv.Eventually(t, sidecartest.Delivery-time.Since(committed), fmt.Sprintf("%q (typed in cell %s) found after the write", query, cell),
			func() bool { return slices.Contains(search(), sidecartest.CellURI(sidecartest.NbName, cell)) })
		t.Logf("search found %q %v after its write (debounce 250 ms)", query, time.Since(committed).Round(time.Millisecond))
		next = i + 1
	})

	if n := sc.Metric("jupyter_mcp_sidecar_mcp_calls_total"); n == 0 {
		t.Error("the metrics hook, on by default, counted no call")
	}
}

// buildCommand builds the main package pkg, relative to dir, into the test's temporary
// directory.
func buildCommand(t *testing.T, dir, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s in %s: %v\n%s", pkg, dir, err, out)
	}
	return bin
}

// withBinary starts sidecars from bin instead of the package's binary while f runs.
func withBinary(bin string, f func()) {
	saved := sidecartest.Binary
	sidecartest.Binary = bin
	defer func() { sidecartest.Binary = saved }()
	f()
}

// TestExampleExtensionModule builds examples/extension (its own module, with a
// replace directive pointing here) and calls its tool through MCP; docs/EXTENSIONS.md's
// configuration of it passes that binary's `config check`.
func TestExampleExtensionModule(t *testing.T) {
	bin := buildCommand(t, filepath.Join(sidecartest.RepoRoot, "examples", "extension"), "./cmd/jupyter-mcp-sidecar-stats")
	checkExtensionsExample(t, bin)
	sc, _, steps := preloadedSidecar(t, bin, sidecartest.Options{Extra: "extensions: {stats: {label: e2e}}\n"})
	c := sidecartest.DialGo(t, sc.MCPURL(), true)
	c.Bind(sidecartest.NbName, sidecartest.NbPath)
	var got struct {
		Label     string
		Notebooks []struct {
			Path  string
			Names []string
			Cells map[string]int
		}
	}
	// The notebook's first change set reaches the extension after the debounce.
	testenv.Eventually(t, testenv.Wait, "notebook_stats with a notebook", func() bool {
		if err := json.Unmarshal([]byte(c.CallTool("notebook_stats", nil)), &got); err != nil {
			t.Fatal(err)
		}
		return len(got.Notebooks) != 0
	}, func() string { return fmt.Sprintf("notebook_stats = %+v", got) })
	cells := 0
	for _, c := range steps[sidecartest.Preloaded-1].After.All() {
		if c.CellType == "code" {
			cells++
		}
	}
	if got.Label != "e2e" || len(got.Notebooks) != 1 || got.Notebooks[0].Path != sidecartest.NbPath ||
		!slices.Equal(got.Notebooks[0].Names, []string{sidecartest.NbName}) || got.Notebooks[0].Cells["code"] != cells {
		t.Fatalf("notebook_stats = %+v, want %s bound as %s with %d code cells", got, sidecartest.NbPath, sidecartest.NbName, cells)
	}
	if caps := c.Read("capabilities://"); !strings.Contains(caps, `"name":"stats.notebooks","description":"notebook_stats: cells and outputs per notebook.","enabled":true,"source":"stats"`) {
		t.Fatalf("capabilities:// = %s", caps)
	}
	if !strings.Contains(c.CallTool("search_notebooks", map[string]any{"query": "import"}), sidecartest.NbPath) {
		t.Error("the custom main lacks the extensions every build has")
	}
}

// checkExtensionsExample runs bin's `config check` on docs/EXTENSIONS.md's example of
// configuring stats, which only a binary with the extension compiled in accepts.
func checkExtensionsExample(t *testing.T, bin string) {
	t.Helper()
	blocks := testenv.DocBlocks(t, "yaml", "docs/EXTENSIONS.md")
	i := slices.IndexFunc(blocks, func(b testenv.Block) bool { return strings.Contains(b.Text, "stats: {label:") })
	if i < 0 {
		t.Fatal("docs/EXTENSIONS.md has no YAML example configuring stats")
	}
	ex := blocks[i]
	dir := t.TempDir()
	cfg := filepath.Join(dir, "extensions.yaml")
	if err := os.WriteFile(cfg, []byte(ex.Text), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := exec.CommandContext(ctx, bin, "config", "check", "--config", cfg)
	check.Dir = dir // where the default store, and so the state file, is looked for
	if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), "label: my notebooks") {
		t.Fatalf("%s: config check = %v\n%s", ex, err, out)
	}
}

// TestExtensionRules: an extension written for another API version stops start with
// a message naming it and both versions; one wrapping a missing tool starts, with a
// warning.
func TestExtensionRules(t *testing.T) {
	bin := buildCommand(t, ".", "./testdata/badext")
	dir := t.TempDir()
	sidecartest.StartWriter(t, filepath.Join(dir, ".jupyter_ystore.db"))
	cfg := filepath.Join(dir, "refused.yaml")
	if err := os.WriteFile(cfg, []byte("store: {backend: sqlite, sqlite: {path: "+filepath.Join(dir, ".jupyter_ystore.db")+"}}\n"+
		"server: {listen: 127.0.0.1:0, insecure_no_auth: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "--config", cfg).CombinedOutput()
	want := `extension "t-oldapi" (version "0.0.1") was written for extension API "v1"; this sidecar provides "v2"`
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("serve with t-oldapi: %v\n%s\nwant it to stop with: %s", err, out, want)
	}

	var sc *sidecartest.Sidecar
	withBinary(bin, func() {
		sc = sidecartest.StartSidecar(t, dir, sidecartest.Options{Extra: "extensions: {t-oldapi: {enabled: false}}\n"})
	})
	logs := sc.Logs.String()
	for _, want := range [][]string{
		{`"level":"WARN"`, `"msg":"cannot wrap a tool that does not exist; skipped"`, `"extension":"t-wrapmissing"`, `"tool":"execute_code"`},
		{`"msg":"extension disabled by configuration"`, `"extension":"t-oldapi"`},
	} {
		if !slices.ContainsFunc(strings.Split(logs, "\n"), func(line string) bool {
			return !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(line, w) })
		}) {
			t.Errorf("no log line holds %v:\n%s", want, logs)
		}
	}
}
