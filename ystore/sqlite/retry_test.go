package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// busyError provokes a real SQLITE_BUSY: a read while another connection holds an
// exclusive lock.
func busyError(t *testing.T) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "busy.db")
	w, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.SetMaxOpenConns(1)
	for _, stmt := range []string{"CREATE TABLE t (x)", "BEGIN EXCLUSIVE", "INSERT INTO t VALUES (1)"} {
		if _, err := w.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	defer w.Exec("ROLLBACK")
	r, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var n int
	err = r.QueryRow("SELECT count(*) FROM t").Scan(&n)
	if !isBusy(err) {
		t.Fatalf("read under an exclusive lock: %v, want SQLITE_BUSY", err)
	}
	return err
}

func TestRetryBusy(t *testing.T) {
	errBusy := busyError(t)
	errOther := errors.New("other")
	tests := []struct {
		name      string
		busy      int // attempts refused before the result
		result    error
		maxWait   time.Duration
		want      error
		wantSleep time.Duration
	}{
		{"first try", 0, nil, time.Second, nil, 0},
		{"backoff doubles to 2ms", 6, nil, time.Second, nil, (100 + 200 + 400 + 800 + 1600 + 2000) * time.Microsecond},
		{"other error is not retried", 0, errOther, time.Second, errOther, 0},
		{"gives up after maxWait", 1 << 30, nil, 10 * time.Millisecond, errBusy, 11100 * time.Microsecond}, // 9.1 ms < 10 ms, one more 2 ms
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				attempts, retries := 0, 0
				start := time.Now()
				err := retryBusy(context.Background(), tt.maxWait, func() { retries++ }, func() error {
					attempts++
					if attempts <= tt.busy {
						return errBusy
					}
					return tt.result
				})
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %v", err, tt.want)
				}
				if slept := time.Since(start); slept != tt.wantSleep {
					t.Fatalf("slept %v, want %v", slept, tt.wantSleep)
				}
				if retries != attempts-1 {
					t.Fatalf("%d retries for %d attempts", retries, attempts)
				}
			})
		})
	}
	t.Run("context cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			defer cancel()
			err := retryBusy(ctx, time.Second, func() {}, func() error { return errBusy })
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want the context's", err)
			}
		})
	})
}
