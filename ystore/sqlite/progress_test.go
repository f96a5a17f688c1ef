package sqlite

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A read of the whole store says when it starts, then how far it has come every
// progressEvery, never more often, and its status counts every chunk at once.
func TestLoadProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		tl, err := New(Config{Path: "store.db", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		p := tl.startLoad(reasonStart, 3, 1000)
		for range 4 {
			time.Sleep(progressEvery / 4) // the sink's pace, not a wait
			p.add(100)
		}
		if st := tl.Status().Load; !st.Active || st.Rows != 400 || st.Total != 1000 || st.Rooms != 3 {
			t.Errorf("status %+v, want 400 of 1000 rows of 3 rooms, active", st)
		}
		p.add(700) // beyond the total: counted up to it
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		want := []string{
			`msg="reading y-store" store=store.db reason=start rooms=3 rows=1000`,
			`msg="reading y-store" store=store.db reason=start rows_done=400 rows=1000 rows_per_second=80 rooms=3 elapsed=5s`,
		}
		if len(lines) != len(want) {
			t.Fatalf("logs:\n%s\nwant %d lines", logs.String(), len(want))
		}
		for i, w := range want {
			if !strings.HasSuffix(lines[i], w) {
				t.Errorf("log line %d = %q, want it to end with %q", i, lines[i], w)
			}
		}
		if st := tl.Status().Load; st.Rows != 1000 {
			t.Errorf("status %+v, want the rows counted up to the total", st)
		}
	})
}
