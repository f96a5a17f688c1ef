// Package ystoretest holds test helpers for the tailers' contract (package ystore).
package ystoretest

import (
	"context"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// TapStreams makes every streamed event of events pass each chunk of rows it reads to
// tap before its reader gets it; an error of tap ends the read with it.
func TapStreams(events []ystore.Event, tap func(rows []ystore.Row) error) {
	for i, e := range events {
		if e.Stream == nil {
			continue
		}
		stream := e.Stream
		events[i].Stream = func(ctx context.Context, yield func([]ystore.Row) error) error {
			return stream(ctx, func(rows []ystore.Row) error {
				if err := tap(rows); err != nil {
					return err
				}
				return yield(rows)
			})
		}
	}
}
