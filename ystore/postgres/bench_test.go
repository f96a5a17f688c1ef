package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// BenchmarkCommitToDelivered measures the time from a writer's INSERT (autocommit) to the
// tailer's sink receiving the row, one row at a time, woken by NOTIFY or by polling.
func BenchmarkCommitToDelivered(b *testing.B) {
	for _, mode := range []struct {
		name          string
		disableListen bool
		poll          time.Duration
	}{
		{"listen", false, 2 * time.Second},
		{"poll_100ms", true, 100 * time.Millisecond},
	} {
		b.Run(mode.name, func(b *testing.B) {
			cfg := testConfig(b)
			cfg.DisableListen, cfg.PollInterval = mode.disableListen, mode.poll
			conn := dial(b, cfg)
			delivered := make(chan time.Time, 1)
			tl, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- tl.Run(ctx, func(_ context.Context, events []ystore.Event) error {
					delivered <- time.Now()
					return nil
				})
			}()
			defer func() { cancel(); <-done }()
			waitLoaded(b, tl)
			var lat []time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if mode.disableListen {
					// Pacing, not a wait: commit at a uniformly random point of the poll period.
					time.Sleep(rand.N(mode.poll))
				}
				start := time.Now()
				insert(b, conn, cfg, "room", fmt.Appendf(nil, "u%d", i))
				lat = append(lat, (<-delivered).Sub(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkLoad measures Load of a store of 100 rooms and 500k rows of 64 bytes.
func BenchmarkLoad(b *testing.B) {
	cfg := testConfig(b)
	conn := dial(b, cfg)
	const rooms, perRoom = 100, 5000
	update := make([]byte, 64)
	if _, err := conn.CopyFrom(context.Background(), pgx.Identifier{cfg.Schema, cfg.Table},
		[]string{"path", "yupdate", "timestamp"},
		pgx.CopyFromSlice(rooms*perRoom, func(i int) ([]any, error) {
			return []any{fmt.Sprintf(".notebook:%04d.y", i%rooms), update, float64(i)}, nil
		})); err != nil {
		b.Fatal(err)
	}
	tl, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		events, err := tl.Load(context.Background())
		if err != nil || len(events) != rooms || rowCount(events) != rooms*perRoom {
			b.Fatalf("load: %d events, %d rows, %v", len(events), rowCount(events), err)
		}
	}
}
