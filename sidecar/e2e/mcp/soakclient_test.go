package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// soakClient is one mcp-go session of the fault soak. A 2025-11-25 session subscribes
// with resources/subscribe and reads its GET stream itself, dropping it at random and
// resuming with Last-Event-ID; a 2026-07-28 session drops its subscriptions/listen
// stream at random and listens again. It records when each notification arrived.
type soakClient struct {
	id     int
	modern bool
	uris   []string
	c      *client.Client
	url    string
	sessID string
	ack    chan time.Time // 2026-07-28: arrival of each listen acknowledgement
	acked  atomic.Bool    // 2026-07-28: a first listen stream was acknowledged

	mu      sync.Mutex
	recv    map[string][]time.Time // uri → arrival times
	foreign []string               // notifications for URIs not subscribed
	up      []span                 // when the client was being served (see expects)
	errs    []string
	drops   atomic.Int64
	resumes atomic.Int64
}

// span is a period [from, to] during which a stream was open (to zero: still open).
type span struct{ from, to time.Time }

func (c *soakClient) era() string {
	if c.modern {
		return "2026-07-28"
	}
	return "2025-11-25"
}

// dialSoak initializes an mcp-go session of the given era; a 2025-11-25 one subscribes
// to uris at once (its stream opens in run), a 2026-07-28 one listens in run.
func dialSoak(t *testing.T, url string, id int, modern bool, uris []string) (*soakClient, error) {
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + sidecartest.Token}))
	if err != nil {
		return nil, err
	}
	version := mcp.ProtocolVersion20251125
	if modern {
		version = mcp.ProtocolVersion20260728
	}
	c := &soakClient{id: id, modern: modern, uris: uris, url: url, recv: map[string][]time.Time{}, ack: make(chan time.Time, 8),
		c: client.NewClient(tr, client.WithProtocolVersion(version))}
	c.c.OnNotification(func(n mcp.JSONRPCNotification) {
		switch n.Method {
		case string(mcp.MethodNotificationSubscriptionsAcknowledged):
			c.acked.Store(true)
			c.ack <- time.Now()
		case string(mcp.MethodNotificationResourceUpdated):
			if uri, ok := n.Params.AdditionalFields["uri"].(string); ok {
				c.received(uri, time.Now())
			}
		}
	})
	if err := c.c.Start(context.Background()); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "sidecar-soak", Version: "1"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.c.Initialize(ctx, init); err != nil {
		_ = c.c.Close()
		return nil, err
	}
	if !modern {
		for _, u := range uris {
			req := mcp.SubscribeRequest{}
			req.Params.URI = u
			//lint:ignore SA1019 the 2025-11-25 era is under test
			if err := c.c.Subscribe(ctx, req); err != nil {
				_ = c.c.Close()
				return nil, err
			}
		}
		c.sessID = tr.GetSessionId()
	}
	return c, nil
}

func (c *soakClient) received(uri string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range c.uris {
		if u == uri {
			c.recv[uri] = append(c.recv[uri], at)
			return
		}
	}
	c.foreign = append(c.foreign, uri)
}

func (c *soakClient) fail(format string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, time.Now().Format("15:04:05.000")+" "+strings.ReplaceAll(format, "%v", err.Error()))
}

// run drives the client's streams until ctx ends.
func (c *soakClient) run(ctx context.Context) {
	if c.modern {
		c.listenLoop(ctx)
	} else {
		c.streamLoop(ctx)
	}
}

// streaming reports whether the client's first stream is open: a 2025-11-25 session's
// GET stream, a 2026-07-28 listen stream acknowledged.
func (c *soakClient) streaming() bool {
	if c.modern {
		return c.acked.Load()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.up) > 0
}

// upFor is how long a GET stream stays open before the client drops it.
func upFor() time.Duration { return time.Duration(500+rand.IntN(7500)) * time.Millisecond }

// listenFor is how long a listen stream stays open: longer than a GET stream, since a
// change is owed to it only if it stays open soakWindow after the commit.
func listenFor() time.Duration { return time.Duration(2000+rand.IntN(13000)) * time.Millisecond }

// downFor is how long a dropped stream stays closed: mostly a reconnect, sometimes a
// few seconds, always within the session grace (10 s).
func downFor() time.Duration {
	if rand.IntN(10) == 0 {
		return time.Duration(1000+rand.IntN(2000)) * time.Millisecond
	}
	return time.Duration(20+rand.IntN(280)) * time.Millisecond
}

// streamLoop reads the 2025-11-25 session's GET stream, dropping it at random and
// resuming with the last event id seen. A refused resume ends the loop: the session is
// lost, and every later change counts as lost for it.
func (c *soakClient) streamLoop(ctx context.Context) {
	lastID := ""
	for ctx.Err() == nil {
		connCtx, drop := context.WithTimeout(ctx, upFor())
		req, _ := http.NewRequestWithContext(connCtx, http.MethodGet, c.url, nil)
		req.Header.Set("Authorization", "Bearer "+sidecartest.Token)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.sessID)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
			c.resumes.Add(1)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil && resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			drop()
			c.fail("GET stream: %v (the session is lost)", errString(resp.Status))
			return
		}
		if err == nil {
			c.mu.Lock()
			if len(c.up) == 0 {
				c.up = append(c.up, span{from: time.Now()})
			}
			c.mu.Unlock()
			readSSE(resp.Body, func(id, data string) {
				if uri, ok := updatedURI(data); ok {
					c.received(uri, time.Now())
				}
				if id != "" {
					lastID = id
				}
			})
			resp.Body.Close()
		} else if ctx.Err() == nil && connCtx.Err() == nil {
			c.fail("GET stream: %v", err)
		}
		drop()
		if ctx.Err() == nil {
			c.drops.Add(1)
			sleepCtx(ctx, downFor())
		}
	}
}

// readSSE calls each with the id ("" if none) and the data of every complete event of
// an SSE stream, until the stream ends. An event is complete at the blank line that
// ends it: one cut off by a dropped connection is not dispatched, as an EventSource
// would not, so the client neither counts it nor resumes after it.
func readSSE(body io.Reader, each func(id, data string)) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var id, data string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != "" {
				each(id, data)
			}
			id, data = "", ""
			continue
		}
		if v, ok := strings.CutPrefix(line, "id:"); ok {
			id = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data += v
		}
	}
}

// updatedURI parses an SSE data line holding notifications/resources/updated.
func updatedURI(data string) (string, bool) {
	if !strings.Contains(data, `"notifications/resources/updated"`) {
		return "", false
	}
	var n struct {
		Params struct {
			URI string `json:"uri"`
		} `json:"params"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(data)), &n) != nil || n.Params.URI == "" {
		return "", false
	}
	return n.Params.URI, true
}

// listenLoop opens the 2026-07-28 listen stream, keeps it a random while and drops it,
// again and again. A stream is counted as up from the arrival of its acknowledgement
// to the moment the client drops it or the server ends it.
func (c *soakClient) listenLoop(ctx context.Context) {
	for ctx.Err() == nil {
		for len(c.ack) > 0 {
			<-c.ack
		}
		var ended atomic.Int64 // unix nanoseconds at which the server ended the stream
		stop, err := c.c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: c.uris}, func(err error) {
			ended.Store(time.Now().UnixNano())
			c.fail("listen: %v", err)
		})
		if err != nil {
			c.fail("listen: %v", err)
			sleepCtx(ctx, time.Second)
			continue
		}
		var from time.Time
		select {
		case from = <-c.ack:
		case <-time.After(30 * time.Second):
			c.fail("listen: %v", errString("no acknowledgement within 30 s"))
		case <-ctx.Done():
		}
		if !from.IsZero() {
			sleepCtx(ctx, listenFor())
		}
		to := time.Now()
		stop()
		if e := ended.Load(); e != 0 && time.Unix(0, e).Before(to) {
			to = time.Unix(0, e)
		}
		if !from.IsZero() {
			c.mu.Lock()
			c.up = append(c.up, span{from: from, to: to})
			c.mu.Unlock()
		}
		if ctx.Err() == nil {
			c.drops.Add(1)
			sleepCtx(ctx, downFor())
		}
	}
}

// expects reports whether a change committed at tc must be announced to the client:
// a 2025-11-25 session from its first GET stream on (it resumes within the grace, so it
// is served even while its stream is down); a 2026-07-28 client only if one of its
// listen streams was acknowledged before tc and stayed open until tc+window (the
// transport has no resumption: a change while no listen stream is open is nobody's).
func (c *soakClient) expects(tc time.Time, window time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.modern {
		return len(c.up) > 0 && !tc.Before(c.up[0].from)
	}
	for _, s := range c.up {
		if !s.from.After(tc) && !s.to.Before(tc.Add(window)) {
			return true
		}
	}
	return false
}

// coveredAfter returns the delay from tc to the first notification for uri that arrived
// at or after tc, or false if none did.
func (c *soakClient) coveredAfter(uri string, tc time.Time) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recv := c.recv[uri]
	i := sort.Search(len(recv), func(i int) bool { return !recv[i].Before(tc) })
	if i == len(recv) {
		return 0, false
	}
	return recv[i].Sub(tc), true
}

// settle sorts the arrival times, once the client is stopped.
func (c *soakClient) settle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.recv {
		slices.SortFunc(r, time.Time.Compare)
	}
}

func (c *soakClient) close() { _ = c.c.Close() }

type errString string

func (e errString) Error() string { return string(e) }

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
