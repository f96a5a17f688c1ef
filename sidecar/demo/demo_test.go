package demo

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

var quiet = slog.New(slog.DiscardHandler)

func gz(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func line(update string, delay int) string {
	return fmt.Sprintf(`{"update":%q,"delay_ms":%d}`+"\n", base64.StdEncoding.EncodeToString([]byte(update)), delay)
}

func TestParseSession(t *testing.T) {
	tests := []struct {
		name  string
		input []byte
		want  []Step
		err   string
	}{
		{"two steps", gz(t, line("a", 0)+"\n"+line("bc", 1500)), []Step{{[]byte("a"), 0}, {[]byte("bc"), 1500 * time.Millisecond}}, ""},
		{"not gzip", []byte("{}"), nil, "gunzip"},
		{"bad json", gz(t, "{\n"), nil, "line 1"},
		{"empty update", gz(t, line("a", 1)+`{"update":"","delay_ms":1}`), nil, "line 2: invalid demo session: empty update"},
		{"missing delay", gz(t, `{"update":"YQ=="}`), nil, "delay_ms missing"},
		{"negative delay", gz(t, `{"update":"YQ==","delay_ms":-1}`), nil, "delay_ms missing or outside"},
		{"bad base64", gz(t, `{"update":"!!","delay_ms":1}`), nil, "line 1"},
		{"empty", gz(t, ""), nil, "no updates"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSession(bytes.NewReader(tt.input))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrSession) {
					t.Fatalf("ParseSession() error = %v, want %q wrapping ErrSession", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("ParseSession() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEmbeddedSession(t *testing.T) {
	steps, err := ParseSession(bytes.NewReader(session))
	if err != nil {
		t.Fatal(err)
	}
	var total time.Duration
	for _, s := range steps {
		total += s.Delay
	}
	if len(steps) < 100 || total < time.Minute {
		t.Fatalf("embedded session has %d steps over %s; want a realistic session", len(steps), total)
	}
}

func FuzzParseSession(f *testing.F) {
	f.Add(gz(f, line("a", 0)+line("b", 10)))
	f.Add(gz(f, `{"update":"YQ==","delay_ms":99999999999}`))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		steps, err := ParseSession(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrSession) {
				t.Fatalf("error %v does not wrap ErrSession", err)
			}
			return
		}
		for _, s := range steps {
			if len(s.Update) == 0 || s.Delay < 0 || s.Delay > time.Hour {
				t.Fatalf("accepted step %+v", s)
			}
		}
	})
}

type storeRow struct {
	path      string
	update    string
	timestamp float64
}

func readStore(t *testing.T, path string) (rows []storeRow, version int, journal string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&journal); err != nil {
		t.Fatal(err)
	}
	q, err := db.Query(`SELECT path, yupdate, timestamp FROM yupdates ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for q.Next() {
		var r storeRow
		var u []byte
		if err := q.Scan(&r.path, &u, &r.timestamp); err != nil {
			t.Fatal(err)
		}
		r.update = string(u)
		rows = append(rows, r)
	}
	return rows, version, journal
}

func readFiles(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := db.Query(`SELECT id, path FROM Files`)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	files := map[string]string{}
	for q.Next() {
		var id, p string
		if err := q.Scan(&id, &p); err != nil {
			t.Fatal(err)
		}
		files[id] = p
	}
	return files
}

func TestWriterReplaysForever(t *testing.T) {
	dir := t.TempDir()
	w := New(Options{Dir: dir, Logger: quiet, Session: gz(t, line("u1", 20)+line("u2", 20)+line("u3", 20)), Speed: 4})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.Create(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	firstRoom := w.Room()
	files := readFiles(t, w.FileIDDBPath())
	if len(files) != 1 || files[w.FileID()] != dir+"/demo.ipynb" {
		t.Fatalf("fileid db = %v for room %s", files, firstRoom)
	}
	if rows, version, journal := readStore(t, w.StorePath()); len(rows) != 0 || version != 2 || journal != "delete" {
		t.Fatalf("fresh store: %d rows, user_version %d, journal %q", len(rows), version, journal)
	}

	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testenv.Eventually(t, testenv.Wait, "writer replays the session twice", func() bool { return w.Rounds() >= 2 },
		func() string { return fmt.Sprintf("%d rounds", w.Rounds()) })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run() = %v", err)
	}

	room := w.Room()
	if room == firstRoom {
		t.Fatal("room not renewed after a replay")
	}
	rows, _, _ := readStore(t, w.StorePath())
	want := []string{"u1", "u2", "u3"}
	if len(rows) > len(want) {
		t.Fatalf("store holds %d rows, want at most one replay's %d", len(rows), len(want))
	}
	for i, r := range rows {
		if r.path != room || r.update != want[i] || r.timestamp < float64(time.Now().Add(-time.Minute).Unix()) {
			t.Fatalf("row %d = %+v, want room %s update %s", i, r, room, want[i])
		}
	}
	files = readFiles(t, w.FileIDDBPath())
	if len(files) != 1 || files[w.FileID()] != dir+"/demo.ipynb" {
		t.Fatalf("fileid db = %v, want the current room %s bound to demo.ipynb", files, room)
	}
}

func TestWriterPace(t *testing.T) {
	// At speed 2, the recorded 400 ms pause between the two updates lasts 200 ms.
	w := New(Options{Dir: t.TempDir(), Logger: quiet, Session: gz(t, line("a", 0)+line("b", 400)+line("c", 60000)), Speed: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.Create(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var rows []storeRow
	testenv.Eventually(t, testenv.Wait, "two rows in the store", func() bool {
		rows, _, _ = readStore(t, w.StorePath())
		return len(rows) >= 2
	}, func() string { return fmt.Sprintf("%d rows", len(rows)) })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if gap := rows[1].timestamp - rows[0].timestamp; gap < 0.2 {
		t.Fatalf("second update %.3fs after the first, want >= 0.2s", gap)
	}
	if rows, _, _ := readStore(t, w.StorePath()); len(rows) != 2 {
		t.Fatalf("%d rows, want 2: the third update waits a minute", len(rows))
	}
}

// WriteOnce writes the whole session into the room at once, whatever its delays, and
// leaves it there.
func TestWriteOnce(t *testing.T) {
	w := New(Options{Dir: t.TempDir(), Logger: quiet, Session: gz(t, line("u1", 3_600_000)+line("u2", 3_600_000))})
	ctx := context.Background()
	if err := w.Create(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.WriteOnce(ctx); err != nil {
		t.Fatal(err)
	}
	rows, _, _ := readStore(t, w.StorePath())
	if len(rows) != 2 || rows[0].path != w.Room() || rows[0].update != "u1" || rows[1].update != "u2" {
		t.Fatalf("store rows %+v, want u1 and u2 in room %s", rows, w.Room())
	}
}

func TestWriterErrors(t *testing.T) {
	ctx := context.Background()
	if err := New(Options{Dir: t.TempDir()}).Run(ctx); err == nil {
		t.Error("Run before Create succeeded")
	}
	if err := New(Options{Dir: t.TempDir()}).WriteOnce(ctx); err == nil {
		t.Error("WriteOnce before Create succeeded")
	}
	if err := New(Options{Dir: t.TempDir(), Session: []byte("x")}).Create(ctx); !errors.Is(err, ErrSession) {
		t.Errorf("Create with a bad session = %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StoreFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := New(Options{Dir: dir}).Create(ctx); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("Create over an existing store = %v", err)
	}
}
