package ondisk

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/confine"
)

func nbJSON(src string) string {
	return `{"cells":[{"cell_type":"code","id":"c1","source":"` + src + `","metadata":{},"outputs":[],"execution_count":null}],"metadata":{},"nbformat":4,"nbformat_minor":5}`
}

// recorder is the notebooks of paths; it collects the files a watcher reports.
type recorder struct {
	paths []string
	mu    sync.Mutex
	files []File
	at    []time.Time // when each was reported
}

func (r *recorder) WatchPaths() []string { return r.paths }

func (r *recorder) ApplyFile(_ context.Context, f File) {
	r.mu.Lock()
	r.files = append(r.files, f)
	r.at = append(r.at, time.Now())
	r.mu.Unlock()
}

// goneAt is when path p was last reported gone (zero: never).
func (r *recorder) goneAt(p string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var at time.Time
	for i, f := range r.files {
		if f.Path == p && f.Gone {
			at = r.at[i]
		}
	}
	return at
}

// sources lists the first cell's source of each report for path p, "-" for a file gone.
func (r *recorder) sources(p string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, f := range r.files {
		switch {
		case f.Path == p && f.Gone:
			out = append(out, "-")
		case f.Path == p && f.Snapshot.Len() > 0:
			out = append(out, f.Snapshot.At(0).Source)
		}
	}
	return out
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // as nbformat and git write: atomically
		t.Fatal(err)
	}
}

func start(t *testing.T, cfg Config, paths ...string) *recorder {
	t.Helper()
	rec := &recorder{paths: paths}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	w := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, rec) }()
	t.Cleanup(func() {
		cancel()
		if err := testenv.Receive(t, testenv.Wait, "watcher stopped", done); err != nil {
			t.Error(err)
		}
	})
	return rec
}

func expect(t *testing.T, rec *recorder, p string, want ...string) {
	t.Helper()
	testenv.Eventually(t, testenv.Wait, "reports of "+p, func() bool {
		return strings.Join(rec.sources(p), "|") == strings.Join(want, "|")
	}, func() string { return strings.Join(rec.sources(p), "|") })
}

// TestWatch: a file is reported when first seen, after each rewrite, and once when it is
// gone after it was seen, with fsnotify, with polling, and with polling beyond the directory cap; an
// unchanged or invalid file is not reported.
func TestWatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"fsnotify", Config{PollInterval: 50 * time.Millisecond}}, // watched files are not polled
		{"polling", Config{DisableFSNotify: true, PollInterval: 20 * time.Millisecond}},
		{"over the cap", Config{MaxWatchedDirs: 1, PollInterval: 20 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, filepath.Join(root, "a", "x.ipynb"), nbJSON("one"))
			write(t, filepath.Join(root, "b", "y.ipynb"), nbJSON("uno"))
			cfg := tc.cfg
			cfg.Root, cfg.Coalesce = root, 10*time.Millisecond
			rec := start(t, cfg, "a/x.ipynb", "b/y.ipynb", "missing/z.ipynb")
			expect(t, rec, "a/x.ipynb", "one")
			expect(t, rec, "b/y.ipynb", "uno")
			write(t, filepath.Join(root, "a", "x.ipynb"), nbJSON("two"))
			expect(t, rec, "a/x.ipynb", "one", "two")
			write(t, filepath.Join(root, "b", "y.ipynb"), `{"cells": [`) // a torn write: not reported
			write(t, filepath.Join(root, "b", "y.ipynb"), nbJSON("dos"))
			expect(t, rec, "b/y.ipynb", "uno", "dos")
			write(t, filepath.Join(root, "missing", "z.ipynb"), nbJSON("late"))
			expect(t, rec, "missing/z.ipynb", "late") // never seen before: not gone
			if err := os.Remove(filepath.Join(root, "a", "x.ipynb")); err != nil {
				t.Fatal(err)
			}
			expect(t, rec, "a/x.ipynb", "one", "two", "-")
			write(t, filepath.Join(root, "a", "x.ipynb"), nbJSON("three"))
			expect(t, rec, "a/x.ipynb", "one", "two", "-", "three")
		})
	}
}

// TestGoneAfter: a file is reported gone only once it has stayed missing for GoneAfter,
// so a file deleted and written again meanwhile (an editor's save, the moment of a
// rename) is never reported gone; with fsnotify and with polling.
func TestGoneAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"fsnotify", Config{PollInterval: time.Hour}},
		{"polling", Config{DisableFSNotify: true, PollInterval: 20 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			x, y := filepath.Join(root, "x.ipynb"), filepath.Join(root, "y.ipynb")
			write(t, x, nbJSON("one"))
			write(t, y, nbJSON("uno"))
			cfg := tc.cfg
			cfg.Root, cfg.Coalesce, cfg.GoneAfter = root, 10*time.Millisecond, 500*time.Millisecond
			rec := start(t, cfg, "x.ipynb", "y.ipynb")
			expect(t, rec, "x.ipynb", "one")
			expect(t, rec, "y.ipynb", "uno")

			removed := time.Now()
			if err := os.Remove(x); err != nil {
				t.Fatal(err)
			}
			expect(t, rec, "x.ipynb", "one", "-")
			if d := rec.goneAt("x.ipynb").Sub(removed); d < cfg.GoneAfter {
				t.Errorf("gone reported %v after the removal, before GoneAfter (%v)", d, cfg.GoneAfter)
			}

			if err := os.Remove(y); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // stimulus: the file stays missing for longer than Coalesce
			write(t, y, nbJSON("dos"))
			expect(t, rec, "y.ipynb", "uno", "dos") // and never "-" before "dos"
		})
	}
}

// TestTooLarge: a file over MaxFileBytes is never read.
func TestTooLarge(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "big.ipynb"), nbJSON(strings.Repeat("x", 1000)))
	write(t, filepath.Join(root, "small.ipynb"), nbJSON("s"))
	rec := start(t, Config{Root: root, MaxFileBytes: 500, PollInterval: 10 * time.Millisecond}, "big.ipynb", "small.ipynb")
	expect(t, rec, "small.ipynb", "s")
	if got := rec.sources("big.ipynb"); len(got) != 0 {
		t.Fatalf("big file reported: %d", len(got))
	}
}

// Confined (hub mode), a notebook path is resolved beneath the root: a link inside it
// is read, a link to another user's notebook (relative, absolute, or through a linked
// directory) is neither read nor said to exist, by Read, Exists or the watcher; not
// confined (single-server mode), links are followed wherever they lead, as Jupyter does.
func TestConfinedFiles(t *testing.T) {
	top := t.TempDir()
	alice, bob := filepath.Join(top, "alice"), filepath.Join(top, "bob")
	write(t, filepath.Join(alice, "a.ipynb"), nbJSON("alice"))
	write(t, filepath.Join(bob, "b.ipynb"), nbJSON("bob"))
	for link, target := range map[string]string{
		"inside.ipynb":   "a.ipynb",
		"relative.ipynb": "../bob/b.ipynb",
		"absolute.ipynb": filepath.Join(bob, "b.ipynb"),
		"bobdir":         "../bob",
	} {
		if err := os.Symlink(target, filepath.Join(alice, link)); err != nil {
			t.Fatal(err)
		}
	}
	outside := []string{"relative.ipynb", "absolute.ipynb", "bobdir/b.ipynb"}
	for _, confined := range []bool{true, false} {
		t.Run(map[bool]string{true: "confined", false: "not confined"}[confined], func(t *testing.T) {
			cfg := Config{Root: alice, PollInterval: 20 * time.Millisecond, Coalesce: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
			if confined {
				cfg.Confine = confine.New(confine.Config{Base: top, Root: alice})
				defer cfg.Confine.Close()
			}
			w := New(cfg)
			if f, err := w.Read("inside.ipynb"); err != nil || f.Snapshot.At(0).Source != "alice" {
				t.Fatalf("Read(inside.ipynb) = %v", err)
			}
			for _, p := range outside {
				f, err := w.Read(p)
				switch {
				case confined && (err == nil || w.Exists(p)):
					t.Errorf("%s, a link out of the root: read (%v) or said to exist", p, err)
				case !confined && (err != nil || f.Snapshot.At(0).Source != "bob"):
					t.Errorf("%s not confined: Read = %v, want bob's notebook", p, err)
				}
			}
			late := "late-" + strings.ReplaceAll(t.Name(), "/", "-") + ".ipynb"
			rec := start(t, cfg, append([]string{"inside.ipynb", late}, outside...)...)
			expect(t, rec, "inside.ipynb", "alice")
			// The first sync checked every path; a file that appears after it is reported
			// by a later one: then whatever the outside paths gave is in.
			write(t, filepath.Join(alice, late), nbJSON("late"))
			expect(t, rec, late, "late")
			for _, p := range outside {
				if confined {
					expect(t, rec, p)
				} else {
					expect(t, rec, p, "bob")
				}
			}
		})
	}
}

// Confined, the user's directory is pinned at its first use and her notebook files must
// be hers (issue 39): once alice's directory is replaced by a link to bob's home, no
// file of bob's is read, nor its time, nor said to exist; a hard link to bob's notebook
// (bob's uid) in her home is not read, her own hard link is.
func TestConfinedSwapAndHardLink(t *testing.T) {
	top := t.TempDir()
	alice, bob := filepath.Join(top, "alice"), filepath.Join(top, "bob")
	write(t, filepath.Join(alice, "a.ipynb"), nbJSON("alice"))
	write(t, filepath.Join(bob, "a.ipynb"), nbJSON("bob"))
	cfg := Config{Root: alice, Confine: confine.New(confine.Config{Base: top, Root: alice}), Logger: slog.New(slog.DiscardHandler)}
	defer cfg.Confine.Close()
	w := New(cfg)
	if f, err := w.Read("a.ipynb"); err != nil || f.Snapshot.At(0).Source != "alice" {
		t.Fatalf("Read before the swap = %v", err)
	}
	if os.Getuid() == 0 {
		const aliceUID, bobUID = testenv.Stranger + 1, testenv.Stranger + 2
		for p, uid := range map[string]int{alice: aliceUID, filepath.Join(alice, "a.ipynb"): aliceUID, filepath.Join(bob, "a.ipynb"): bobUID} {
			if err := os.Chown(p, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
		for target, link := range map[string]string{filepath.Join(bob, "a.ipynb"): "bobs.ipynb", filepath.Join(alice, "a.ipynb"): "mine.ipynb"} {
			if err := os.Link(target, filepath.Join(alice, link)); err != nil {
				t.Fatal(err)
			}
		}
		hl := New(Config{Root: alice, Confine: confine.New(confine.Config{Base: top, Root: alice}), Logger: slog.New(slog.DiscardHandler)})
		defer hl.cfg.Confine.Close()
		if f, err := hl.Read("bobs.ipynb"); !errors.Is(err, confine.ErrNotOwned) {
			t.Errorf("a hard link to bob's notebook: Read = %v, %v; want ErrNotOwned", f.Snapshot, err)
		}
		if f, err := hl.Read("mine.ipynb"); err != nil || f.Snapshot.At(0).Source != "alice" {
			t.Errorf("her own hard link: Read = %v", err)
		}
	}
	if err := os.Rename(alice, alice+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("bob", alice); err != nil {
		t.Fatal(err)
	}
	if f, err := w.Read("a.ipynb"); !errors.Is(err, confine.ErrSwapped) {
		t.Fatalf("Read after the swap = %v, %v; want ErrSwapped", f.Snapshot, err)
	}
	if _, err := w.ModTime("a.ipynb"); !errors.Is(err, confine.ErrSwapped) {
		t.Fatalf("ModTime after the swap = %v; want ErrSwapped", err)
	}
	if w.Exists("a.ipynb") {
		t.Fatal("after the swap, bob's file is said to exist")
	}
}

// TestConfigValidate: the bounds the daemon sets are refused, by their keys, unless
// above zero.
func TestConfigValidate(t *testing.T) {
	ok := Config{PollInterval: time.Second, MaxWatchedDirs: 1, MaxFileBytes: 1}
	for _, tt := range []struct {
		name string
		set  func(*Config)
		want string // "" : valid
	}{
		{"the daemon's bounds", func(*Config) {}, ""},
		{"poll interval zero", func(c *Config) { c.PollInterval = 0 }, "poll_interval: must be > 0, got 0s"},
		{"poll interval negative", func(c *Config) { c.PollInterval = -time.Second }, "poll_interval: must be > 0, got -1s"},
		{"no watched directory", func(c *Config) { c.MaxWatchedDirs = 0 }, "max_watched_dirs: must be > 0, got 0"},
		{"negative file size", func(c *Config) { c.MaxFileBytes = -1 }, "max_file_bytes: must be > 0, got -1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.set(&c)
			err := c.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || err.Error() != tt.want || !errors.Is(err, keyerr.ErrInvalid)) {
				t.Fatalf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestRefusedFileWarnsOnce: a file that cannot be read (cut short, too large) keeps what
// is served as it was, and the operator hears it at warn once until the file reads
// again, not at each rewrite (red team of issue 42, pass 19b, N4: refused saves were
// silent).
func TestRefusedFileWarnsOnce(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "a.ipynb")
	write(t, p, nbJSON("one"))
	var log testenv.LockedBuffer
	rec := start(t, Config{Root: root, MaxFileBytes: 500, PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))}, "a.ipynb")
	expect(t, rec, "a.ipynb", "one")
	warns := func() int { return strings.Count(log.String(), "level=WARN msg=\"notebook file not read") }
	write(t, p, nbJSON("two")[:40]) // cut short
	testenv.Eventually(t, testenv.Wait, "a warning", func() bool { return warns() == 1 }, log.String)
	write(t, p, nbJSON(strings.Repeat("x", 1000))) // too large
	testenv.Eventually(t, testenv.Wait, "the second refusal", func() bool {
		return strings.Contains(log.String(), "level=DEBUG msg=\"notebook file not read")
	}, log.String)
	write(t, p, nbJSON("three"))
	expect(t, rec, "a.ipynb", "one", "three")
	if n := warns(); n != 1 {
		t.Fatalf("%d warnings for one file refused twice in a row, want 1:\n%s", n, log.String())
	}
	write(t, p, "{")
	testenv.Eventually(t, testenv.Wait, "a warning once the file read again", func() bool { return warns() == 2 }, log.String)
	if !strings.Contains(log.String(), "path=a.ipynb") {
		t.Fatalf("the warning does not name the file:\n%s", log.String())
	}
}
