package sidecartest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// MCPClient is one MCP client of either era, Go or TypeScript.
type MCPClient interface {
	Name() string               // the client's kind and era, for messages
	Bind(name, path string)     // use_notebook: name is the notebook at path
	Subscribe(uris ...string)   // resources/subscribe (or listen) to each uri
	Unsubscribe(uris ...string) // ends the subscriptions to each uri
	Read(uri string) string     // resources/read: the text of uri
	Updates() <-chan string     // the URIs the server says were updated, as they arrive
	Close()                     // ends the session
}

// The notebook of the demo session, as the tests bind it.
const (
	NbName    = "analysis"             // the name it is bound to
	NbURI     = "notebook://" + NbName // its resource
	Preloaded = 200                    // session steps in the store before the sidecar starts
	// Delivery is a property, not a wait: the budget within which a committed change is
	// announced (docs/BENCHMARKS.md), the 2 s debounce ceiling (notifications.max_delay)
	// plus 500 ms for the tail and the fan-out. Waits for anything else use testenv.Wait.
	Delivery = 2500 * time.Millisecond
)

// Drain empties a client's notifications after quiet has passed without one. It is a
// bounded observation window, for want of a barrier: the server counts the
// notifications it sends over all sessions, not per session.
func Drain(c MCPClient, quiet time.Duration) int {
	n := 0
	for {
		select {
		case <-c.Updates():
			n++
		case <-time.After(quiet):
			return n
		}
	}
}

// AwaitOK reports whether every uri in want was notified to c within the deadline.
func AwaitOK(c MCPClient, within time.Duration, want ...string) bool {
	missing := map[string]bool{}
	for _, u := range want {
		missing[u] = true
	}
	deadline := time.After(within)
	for len(missing) > 0 {
		select {
		case u := <-c.Updates():
			delete(missing, u)
		case <-deadline:
			return false
		}
	}
	return true
}

// Await waits until every uri in want was notified to c.
func Await(t *testing.T, c MCPClient, within time.Duration, want ...string) {
	t.Helper()
	if !AwaitOK(c, within, want...) {
		t.Fatalf("%s: not notified of %v within %v", c.Name(), want, within)
	}
}

// Clients dials every client kind available: mcp-go on both eras, and the official
// TypeScript SDK clients when their npm packages are installed.
func Clients(t *testing.T, sc *Sidecar) []MCPClient {
	cs := []MCPClient{DialRaw(t, sc.MCPURL()), DialGo(t, sc.MCPURL(), false), DialGo(t, sc.MCPURL(), true)}
	return append(cs, dialTS(t, sc.MCPURL())...)
}

// JSONEqual fails the test unless got and want are the same JSON value.
func JSONEqual(t *testing.T, what string, got string, want []byte) {
	t.Helper()
	if !JSONSame(got, want) {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
}

// EventuallyJSON waits until read returns want (as JSON values).
func EventuallyJSON(t *testing.T, what string, read func() string, want []byte) {
	t.Helper()
	var got string
	testenv.Eventually(t, testenv.Wait, what, func() bool { got = read(); return JSONSame(got, want) },
		func() string { return jsonDiff(got, want) })
}

// jsonDiff shows where got and want (compact JSON) first differ, with some context.
func jsonDiff(got string, want []byte) string {
	var g, w bytes.Buffer
	if json.Compact(&g, []byte(got)) != nil || json.Compact(&w, want) != nil {
		return fmt.Sprintf("got %.2000s\nwant %.2000s", got, want)
	}
	a, b := g.String(), w.String()
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(i-300, 0)
	return fmt.Sprintf("%d and %d bytes, first difference at byte %d:\n got …%.1500s\nwant …%.1500s", len(a), len(b), i, a[from:], b[from:])
}

// TryReadText returns a read of uri by g for EventuallyJSON: the text, or what went wrong.
func TryReadText(g *GoClient, uri string) func() string {
	return func() string {
		text, err := g.TryRead(uri)
		if err != nil {
			return err.Error()
		}
		return text
	}
}

// JSONSame compares two JSON documents as values.
func JSONSame(got string, want []byte) bool {
	var a, b any
	return json.Unmarshal([]byte(got), &a) == nil && json.Unmarshal(want, &b) == nil && reflect.DeepEqual(a, b)
}

// MustJSON is s as JSON; an error fails the test.
func MustJSON(t *testing.T, s interface{ JSON() ([]byte, error) }) []byte {
	t.Helper()
	b, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// JoinSource reads an nbformat source: a string or a list of lines.
func JoinSource(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case []any:
		out := ""
		for _, line := range s {
			str, _ := line.(string)
			out += str
		}
		return out
	}
	return ""
}
