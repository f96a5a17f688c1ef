package store

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/changestest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// TestVersionsAcrossReplicasAndRestart: two sidecars following one Postgres store give
// the same content the same version, each can answer what changed since a version the
// other gave (a client moving between replicas keeps working), and a sidecar restarted
// gives the version it gave before. Clients of both eras.
func TestVersionsAcrossReplicasAndRestart(t *testing.T) {
	dsn, schema := sidecartest.InitPostgres(t)
	steps := sidecartest.Session(t)
	jupyter, dirA, dirB := t.TempDir(), t.TempDir(), t.TempDir()
	w := sidecartest.StartPreloaded(t, filepath.Join(jupyter, ".jupyter_ystore.db"), steps)
	fileidDB := filepath.Join(jupyter, "file_id_manager.db")
	sidecartest.CreateFileIDDB(t, fileidDB, filepath.Join(jupyter, sidecartest.NbPath))
	sidecartest.Launch(t, jupyter, fmt.Sprintf(`store: {sqlite: {path: %q}}
ship: {source_id: jupyter-a, postgres: {dsn: %q, schema: %s}}
`, filepath.Join(jupyter, ".jupyter_ystore.db"), dsn, schema), "ship")
	cfg := fmt.Sprintf(`store:
  backend: postgres
  postgres: {dsn: %q, schema: %s, poll_interval: 1s}
fileid: {db_path: %q, root_dir: %q}
`, dsn, schema, fileidDB, jupyter)
	scA := sidecartest.Launch(t, dirA, cfg, "serve")
	scB := sidecartest.Launch(t, dirB, cfg, "serve")
	scA.WaitHTTP("/readyz", http.StatusOK)
	scB.WaitHTTP("/readyz", http.StatusOK)
	a := sidecartest.DialGo(t, scA.MCPURL(), true)
	b := sidecartest.DialGo(t, scB.MCPURL(), false)
	a.Bind(sidecartest.NbName, sidecartest.NbPath)
	b.Bind(sidecartest.NbName, sidecartest.NbPath)

	// both waits until both replicas serve step i, and returns their reads and versions.
	both := func(i int) (string, string) {
		t.Helper()
		want := sidecartest.MustJSON(t, steps[i].After)
		sidecartest.EventuallyJSON(t, "replica A at the step", sidecartest.TryReadText(a, sidecartest.NbURI), want)
		sidecartest.EventuallyJSON(t, "replica B at the step", sidecartest.TryReadText(b, sidecartest.NbURI), want)
		textA, va := a.ReadVersioned(sidecartest.NbURI)
		_, vb := b.ReadVersioned(sidecartest.NbURI)
		if va == "" || va != vb {
			t.Fatalf("step %d: replica A gives version %q, B %q", i, va, vb)
		}
		return textA, va
	}
	// changed asks c what changed since version, applies it to last, and checks it
	// against the read of step i.
	changed := func(c *sidecartest.GoClient, last, version string, i int) {
		t.Helper()
		body := c.Read(sidecartest.NbURI + "/changes?since=" + url.QueryEscape(version))
		ans, err := changestest.Decode([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := changestest.Apply([]byte(last), ans)
		if err != nil {
			t.Fatalf("step %d: %v: %s", i, err, body)
		}
		want, _ := changestest.Canonical(sidecartest.MustJSON(t, steps[i].After))
		if !bytes.Equal(got, want) {
			t.Fatalf("step %d: changes since %s applied:\n%s\nwant\n%s", i, version, got, want)
		}
	}

	i := sidecartest.Preloaded - 1
	last, version := both(i)
	for asked := 0; asked < 8; {
		i++
		w.Write(steps[i].Update)
		if !sidecartest.Visible(steps[i : i+1]) {
			continue
		}
		asked++
		text, v := both(i)
		// The client read A last; it asks B now, and A the next time.
		changed(b, last, version, i)
		changed(a, last, version, i)
		a, b = b, a
		last, version = text, v
	}

	// B restarted: the same content, the same version; what changed since it, after an
	// edit, is answered by the restarted replica.
	if !a.Modern {
		a, b = b, a // a is replica A's client again
	}
	_ = a
	scB.Stop()
	scB = sidecartest.Launch(t, dirB, cfg, "serve")
	scB.WaitHTTP("/readyz", http.StatusOK)
	b = sidecartest.DialGo(t, scB.MCPURL(), true)
	sidecartest.EventuallyJSON(t, "restarted replica at the step", sidecartest.TryReadText(b, sidecartest.NbURI), sidecartest.MustJSON(t, steps[i].After))
	if _, v := b.ReadVersioned(sidecartest.NbURI); v != version {
		t.Fatalf("restarted replica gives version %s, before %s", v, version)
	}
	for {
		i++
		w.Write(steps[i].Update)
		if sidecartest.Visible(steps[i : i+1]) {
			break
		}
	}
	both(i)
	changed(b, last, version, i)
}
