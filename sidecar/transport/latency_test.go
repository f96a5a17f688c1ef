//lint:file-ignore SA1019 the 2025-11-25 era (resources/subscribe, the GET stream) is served and tested on purpose; mcp-go deprecates its client API

package transport

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// TestLatency measures NotebookChanged → client receipt of
// notifications/resources/updated for 1, 100 and 1,000 mcp-go client sessions
// subscribed over HTTP, for each protocol era. It prints a markdown table for
// docs/BENCHMARKS.md. Run: RESOURCES_LATENCY=1 go test ./resources -run Latency -v
func TestLatency(t *testing.T) {
	if os.Getenv("RESOURCES_LATENCY") == "" {
		t.Skip("set RESOURCES_LATENCY=1 to measure notification latency")
	}
	var rows []string
	for _, modern := range []bool{false, true} {
		for _, n := range []int{1, 100, 1000} {
			p50, p99, worst, samples := measureLatency(t, n, modern)
			era := era20251125 + " (GET stream)"
			if modern {
				era = era20260728 + " (subscriptions/listen)"
			}
			rows = append(rows, fmt.Sprintf("| %s | %d | %d | %v | %v | %v |", era, n, samples, p50, p99, worst))
		}
	}
	t.Log("\n| era | sessions | samples | p50 | p99 | max |\n|---|---|---|---|---|---|\n" + joinLines(rows))
}

func joinLines(rows []string) string {
	out := ""
	for _, r := range rows {
		out += r + "\n"
	}
	return out
}

// measureLatency connects n clients subscribed to one cell, publishes changes
// one at a time (waiting for every client before the next) and returns the
// receipt latency distribution over all clients and changes.
func measureLatency(t *testing.T, n int, modern bool) (p50, p99, worst time.Duration, samples int) {
	lib := newLibrary(t, testPath)
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}}, lib)
	uri := "notebook://work/cells/c1"
	type receipt struct {
		client int
		at     time.Time
	}
	got := make(chan receipt, n*4)
	clients := make([]*goClient, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c := dialGo(t, r.url, modern)
			c.OnNotification(func(note mcp.JSONRPCNotification) {
				if note.Method == string(mcp.MethodNotificationResourceUpdated) {
					got <- receipt{client: i, at: time.Now()}
				}
			})
			if modern {
				if _, err := c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: []string{uri}}, nil); err != nil {
					t.Error(err)
				}
			} else {
				req := mcp.SubscribeRequest{}
				req.Params.URI = uri
				if err := c.Subscribe(context.Background(), req); err != nil {
					t.Error(err)
				}
			}
			clients[i] = c
		})
	}
	wg.Wait()
	era := era20251125
	if modern {
		era = era20260728
	}
	testenv.Eventually(t, testenv.Wait, "every client subscribed", func() bool {
		perEra, subs, streams := stats(r)
		if modern {
			return perEra[era] == n && subs == n
		}
		return subs == n && streams == n
	})
	rounds := max(20, 2000/n)
	change := ynotebook.Changes{Cells: map[string]ynotebook.CellChange{"c1": {Source: true}}}
	var lat []time.Duration
	for range rounds {
		start := time.Now()
		r.srv.NotebookChanged(testPath, change, noOrigin)
		seen := make([]bool, n)
		for remaining := n; remaining > 0; {
			select {
			case rc := <-got:
				if !seen[rc.client] {
					seen[rc.client] = true
					remaining--
					lat = append(lat, rc.at.Sub(start))
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%d of %d clients not notified", remaining, n)
			}
		}
		time.Sleep(5 * time.Millisecond) // the pace of the changes, not a wait
	}
	for _, c := range clients {
		_ = c.Close()
	}
	r.stop()
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(10 * time.Microsecond) }
	return pct(0.5), pct(0.99), lat[len(lat)-1].Round(10 * time.Microsecond), len(lat)
}
