// Package publishtest helps the tests of any package check change events: it validates
// them against resources/publish/event.schema.json, listens for them on Postgres, and
// makes and merges events split into parts.
package publishtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

var (
	once       sync.Once
	schema     *jsonschema.Schema
	compileErr error
)

// SchemaPath is the absolute path of the event schema.
func SchemaPath() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "event.schema.json")
}

// Event is the one event payload holds, validated as Validate does.
func Event(t testing.TB, payload []byte) publish.Event {
	t.Helper()
	var ev publish.Event
	Validate(t, payload, &ev)
	return ev
}

// Validate fails the test unless payload is one JSON event valid against the schema
// (with format assertions on), and decodes it into ev (a *publish.Event), every field
// known.
func Validate(t testing.TB, payload []byte, ev any) {
	t.Helper()
	once.Do(func() {
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		schema, compileErr = c.Compile(SchemaPath())
	})
	if compileErr != nil {
		t.Fatalf("compile the event schema: %v", compileErr)
	}
	doc, derr := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if derr != nil {
		t.Fatalf("event is not JSON: %v\n%s", derr, payload)
	}
	if verr := schema.Validate(doc); verr != nil {
		t.Fatalf("event does not match the schema: %v\n%s", verr, payload)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if derr := dec.Decode(ev); derr != nil {
		t.Fatalf("decode event: %v\n%s", derr, payload)
	}
}

// Listener is a connection LISTENing on a channel.
type Listener struct{ conn *pgx.Conn }

// Listen connects to dsn and LISTENs on channel until the test ends.
func Listen(t testing.TB, ctx context.Context, dsn, channel string) *Listener {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return &Listener{conn: conn}
}

// Next waits for the next notification and returns its payload. It may run on any
// goroutine, but not beside another call of Next.
func (l *Listener) Next(ctx context.Context) ([]byte, error) {
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		return nil, err
	}
	return []byte(n.Payload), nil
}

// BigEvent has n added cells, n changed cells and their URIs: far over a NOTIFY.
func BigEvent(n int) publish.Event {
	ch := ynotebook.Changes{Metadata: true, Cells: map[string]ynotebook.CellChange{}}
	for i := range n {
		id := fmt.Sprintf("cell-%04d-%s", i, strings.Repeat("x", 20))
		ch.Added = append(ch.Added, "new-"+id)
		ch.Cells[id] = ynotebook.CellChange{Source: true, Outputs: true, OutputIndexes: []int{0, 1}}
	}
	ev := publish.NewEvent("big.ipynb", ch, publish.Origin{Room: ".notebook:big.y", FileID: "big"})
	for _, id := range ch.Added {
		ev.URIs = append(ev.URIs, "notebook://big/cells/"+id)
	}
	ev.Seq = 7
	return ev
}

// Union merges the parts of a split event back into one.
func Union(t testing.TB, parts []publish.Event) publish.Event {
	t.Helper()
	out := parts[0]
	out.Part = nil
	out.Changes.Cells = map[string]publish.CellChange{}
	out.Changes.Added, out.URIs = nil, nil
	for i, p := range parts {
		if p.Part == nil || p.Part.Index != i || p.Part.Count != len(parts) || p.Seq != out.Seq || p.Path != out.Path {
			t.Fatalf("part %d: %+v", i, p.Part)
		}
		out.Changes.Metadata = out.Changes.Metadata || p.Changes.Metadata
		out.Changes.Added = append(out.Changes.Added, p.Changes.Added...)
		out.URIs = append(out.URIs, p.URIs...)
		maps.Copy(out.Changes.Cells, p.Changes.Cells)
	}
	return out
}
