package e2e

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeInPlace overwrites a file's contents keeping its inode, the way cp does.
func writeInPlace(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitStatus polls path until it answers code, failing t (not the sidecar's test, so
// that it can run in a subtest) after within.
func waitStatus(t *testing.T, sc *sidecar, path string, code int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, body := sc.get(path)
		if got == code {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s answered %d %q, want %d within %v", path, got, body, code, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readIn reads uri, failing t (which may be a subtest) if the read fails.
func readIn(t *testing.T, c *goClient, uri string) string {
	t.Helper()
	text, err := c.tryRead(uri)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// A store truncated, or overwritten with garbage, in place is not ready for as long as
// it is so, the last good notebook stays served meanwhile, and the good file copied
// back in place is noticed by the sidecar itself, with no writer commit.
func TestDamagedStore(t *testing.T) {
	steps := session(t)
	dir := t.TempDir()
	store := filepath.Join(dir, ".jupyter_ystore.db")
	w := startWriter(t, store)
	for _, s := range steps[:preloaded] {
		w.write(s.update)
	}
	sc := startSidecar(t, dir, options{})
	sc.waitHTTP("/readyz", http.StatusOK, 10*time.Second)
	c := dialGo(t, sc.mcpURL(), true)
	c.bind(nbName, nbPath)
	want := mustJSON(t, steps[preloaded-1].after)
	jsonEqual(t, "notebook before the damage", c.read(nbURI), want)
	good, err := os.ReadFile(store)
	if err != nil {
		t.Fatal(err)
	}

	for _, d := range []struct {
		name   string
		damage func()
	}{
		{"truncated", func() {
			if err := os.Truncate(store, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage over the table pages", func() {
			// Page 1 (the header and the schema) stays; every later page is overwritten.
			garbage := bytes.Repeat([]byte{0xa5}, len(good)-4096)
			writeInPlace(t, store, append(good[:4096:4096], garbage...))
		}},
		{"garbage over the header", func() {
			writeInPlace(t, store, append(bytes.Repeat([]byte{0x5a}, 100), good[100:]...))
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			// A write in the clock tick of the last read, of the same size and header,
			// cannot be told from no write by the file's metadata.
			time.Sleep(20 * time.Millisecond)
			d.damage()
			waitStatus(t, sc, "/readyz", http.StatusServiceUnavailable, 5*time.Second)
			for range 20 { // two seconds: four polls and any file event
				if code, body := sc.get("/readyz"); code != http.StatusServiceUnavailable {
					t.Fatalf("damaged store: /readyz %d %s", code, body)
				}
				jsonEqual(t, "notebook while the store is damaged", readIn(t, c, nbURI), want)
				time.Sleep(100 * time.Millisecond)
			}
			writeInPlace(t, store, good)
			waitStatus(t, sc, "/readyz", http.StatusOK, 5*time.Second)
			jsonEqual(t, "notebook after the restore", readIn(t, c, nbURI), want)
		})
	}

	t.Run("the writer goes on", func(t *testing.T) {
		c.subscribe(nbURI)
		i := preloaded
		for ; !visible(steps[preloaded : i+1]); i++ {
		}
		for _, s := range steps[preloaded : i+1] {
			w.write(s.update)
		}
		await(t, c, delivery, nbURI)
		want := mustJSON(t, steps[i].after)
		deadline := time.Now().Add(5 * time.Second)
		for !jsonSame(readIn(t, c, nbURI), want) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		jsonEqual(t, "notebook after the restore and a write", readIn(t, c, nbURI), want)
		waitStatus(t, sc, "/readyz", http.StatusOK, 5*time.Second)
	})
}
