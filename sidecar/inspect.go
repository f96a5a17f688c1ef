package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/ondisk"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
)

// Inspect loads the configured store once and writes, when target is empty, its rooms
// with their paths and row counts; otherwise the notebook target names (by path or file
// id) as nbformat JSON, exactly as the sidecar serves it. cfg.Logger (none: nothing is
// logged) hears what the rooms log, and a warning when the notebook's room is degraded.
func Inspect(ctx context.Context, cfg config.Config, w io.Writer, target string) error {
	obs := config.Obs{Logger: cfg.Logger}
	if obs.Logger == nil {
		obs.Logger = slog.New(slog.DiscardHandler)
	}
	tailer, resolver, closeResolver, err := openStore(cfg, obs, shared{}, confinement{})
	if err != nil {
		return err
	}
	defer func() { tailer.Close(); _ = closeResolver() }()
	rc := cfg.RoomsConfig(obs)
	rc.Resolver = resolver
	if cfg.OnDisk.Enabled {
		rc.Files = ondisk.New(cfg.FilesConfig(obs)) // read, not watched: the saves a degraded room serves
	}
	rs := rooms.New(rc).Writer(nil)
	sink := func(ctx context.Context, events []ystore.Event) error {
		if target != "" {
			// Decode only the room the target names, when its key or the file id database
			// says which one it is; else every room (the path is in the document itself).
			if one := roomOf(ctx, events, target, resolver); one != nil {
				events = one
			}
		}
		return rs.Sink(ctx, events)
	}
	// A store that can stream its rooms' rows is decoded as they are read, so that no
	// more than a chunk of them is held at once.
	load := func(ctx context.Context, sink func(context.Context, []ystore.Event) error) error {
		events, err := tailer.Load(ctx)
		if err != nil {
			return err
		}
		return sink(ctx, events)
	}
	if s, ok := tailer.(ystore.StreamLoader); ok {
		load = s.LoadStream
	}
	if err := load(ctx, sink); err != nil {
		return fmt.Errorf("load store: %w", err)
	}
	// The store is read once: every wait for a missing update is as long as it will be,
	// so the rooms are settled as serve settles them past store.gap_after (updates
	// missing, a document that failed: the notebook's file served where there is one).
	rs.Sweep(time.Now().Add(24 * time.Hour))
	if target == "" {
		return writeRooms(w, rs.Infos())
	}
	p := target
	infos := rs.Infos()
	for _, ri := range infos {
		if ri.FileID == target && ri.Kind == ystore.KindNotebook.String() {
			p = ri.Path
		}
	}
	snap, err := rs.Notebook(p)
	if err != nil {
		return err
	}
	for _, ri := range infos {
		if ri.Path == p && ri.Kind == ystore.KindNotebook.String() && ri.Degraded {
			obs.Logger.Warn("the notebook's room is degraded (rows not applied, updates missing, its document failed or differing from its saved file): what is printed is what the sidecar serves",
				logkey.Room, ri.Key, logkey.Path, p, "rows", ri.Rows, "bad_rows", ri.BadRows, "diverged", ri.Diverged, "gap_clients", ri.GapClients, "document_failed", ri.Failed)
		}
	}
	raw, err := snap.JSON()
	if err != nil {
		return fmt.Errorf("notebook %q: %w", p, err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", " "); err != nil {
		return fmt.Errorf("notebook %q: %w", p, err)
	}
	out.WriteByte('\n')
	_, err = out.WriteTo(w)
	return err
}

// roomOf returns the notebook room of events whose file id or path is target, found
// without decoding anything (the room key, then the file id resolver), or nil.
func roomOf(ctx context.Context, events []ystore.Event, target string, resolver fileid.Resolver) []ystore.Event {
	for _, ev := range events {
		info, ok := ystore.ParseRoom(ev.Room)
		if !ok || info.Kind != ystore.KindNotebook {
			continue
		}
		p := info.Path
		if p == "" && info.FileID != "" && resolver != nil {
			p, _ = resolver.Path(ctx, info.FileID)
		}
		if info.FileID == target || (p != "" && p == target) {
			return []ystore.Event{ev}
		}
	}
	return nil
}

func writeRooms(w io.Writer, infos []rooms.Info) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROOM\tKIND\tFILE ID\tPATH\tROWS\tBAD ROWS")
	for _, ri := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", ri.Key, ri.Kind, dash(ri.FileID), dash(ri.Path), ri.Rows, ri.BadRows)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
