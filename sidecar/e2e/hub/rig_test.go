package hub

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// balancer is the rig's load balancer in front of hub-mode replicas, as an operator
// configures a real one (docs/HUB.md "Several replicas"): a request carrying an
// Mcp-Session-Id goes to the replica that answered that session's initialize (learned
// from the response's header, as HAProxy's `stick store-response` does); any other
// request goes by its Authorization header (the user's token), each token to one
// replica, new tokens round-robin over the live ones. A replica that refuses a
// connection is marked down and the request is sent to another live one; a session of
// a replica that is down goes to its token's replica, which answers 404 (it does not
// know the session). Bodies are buffered (at most 1 MiB) to be sent again; responses
// stream (a listen stream, a GET stream).
type balancer struct {
	URL string

	mu        sync.Mutex
	backends  []*url.URL
	down      []bool
	byToken   map[string]int
	bySession map[string]int
	next      int
	served    []int // requests answered by each backend
}

// maxBalancedBody bounds a request body the balancer buffers.
const maxBalancedBody = 1 << 20

// startBalancer listens on a free loopback port with no backends yet (it answers 503),
// until the test ends.
func startBalancer(t *testing.T) *balancer {
	t.Helper()
	lb := &balancer{byToken: map[string]int{}, bySession: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb.URL = "http://" + ln.Addr().String()
	srv := &http.Server{Handler: lb, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return lb
}

// setBackends makes the replicas at urls the backends.
func (lb *balancer) setBackends(t *testing.T, urls ...string) {
	t.Helper()
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, u := range urls {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		lb.backends = append(lb.backends, p)
		lb.down = append(lb.down, false)
		lb.served = append(lb.served, 0)
	}
}

// replicaOf is the backend the balancer sends authorization's requests to (-1: none yet).
func (lb *balancer) replicaOf(authorization string) int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if i, ok := lb.byToken[authorization]; ok {
		return i
	}
	return -1
}

// pick chooses the backend of r: its session's, else its token's, else the next live one.
func (lb *balancer) pick(r *http.Request) (int, bool) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if i, ok := lb.bySession[r.Header.Get("Mcp-Session-Id")]; ok && !lb.down[i] {
		return i, true
	}
	tok := r.Header.Get("Authorization")
	if i, ok := lb.byToken[tok]; ok && !lb.down[i] {
		return i, true
	}
	for range lb.backends {
		i := lb.next % len(lb.backends)
		lb.next++
		if !lb.down[i] {
			lb.byToken[tok] = i
			return i, true
		}
	}
	return 0, false
}

func (lb *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBalancedBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	for range len(lb.backends) + 1 {
		i, ok := lb.pick(r)
		if !ok {
			break
		}
		refused := false
		p := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = lb.backends[i].Scheme, lb.backends[i].Host, pr.In.Host
				pr.SetXForwarded()
			},
			FlushInterval: -1,
			ErrorLog:      log.New(io.Discard, "", 0), // a stream cut by a killed replica is expected
			ModifyResponse: func(resp *http.Response) error {
				lb.mu.Lock()
				defer lb.mu.Unlock()
				if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
					lb.bySession[sid] = i
				}
				lb.served[i]++
				return nil
			},
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
				if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "dial" {
					refused = true
					lb.mu.Lock()
					lb.down[i] = true
					lb.mu.Unlock()
					return
				}
				http.Error(w, "bad gateway", http.StatusBadGateway)
			},
		}
		out := r.Clone(r.Context())
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		p.ServeHTTP(w, out)
		if !refused {
			return
		}
	}
	http.Error(w, "no replica is up", http.StatusServiceUnavailable)
}

// listener is a 2026-07-28 subscriptions/listen stream of one user's notebooks (through
// the balancer, or to one replica), as an agent runs it: it keeps the version each notification carried
// and, when the stream ends, listens again naming those versions in _meta
// (resources.VersionsKey), after gate is closed.
type listener struct {
	endpoint, auth string
	uris           []string
	gate           chan struct{} // closed: a stream that ended may be opened again
	lost           chan time.Time
	note           func(uri string, at time.Time) // told of each notification (nil: none)

	mu        sync.Mutex
	heard     map[string]string // URI → the version its last notification carried
	notes     int               // notifications heard
	resumes   int               // streams opened again after one ended
	resumedAt time.Time         // when the last stream opened again was acknowledged
	toldAfter int               // notifications heard on streams opened again
}

// newListener listens to uris with auth through endpoint, first naming the versions in
// heard (read before), until the test ends; note, when not nil, is told of each
// notification as it arrives.
func newListener(t *testing.T, endpoint, auth string, heard map[string]string, note func(uri string, at time.Time)) *listener {
	l := &listener{endpoint: endpoint, auth: auth, gate: make(chan struct{}), lost: make(chan time.Time, 1), heard: heard, note: note}
	for u := range heard {
		l.uris = append(l.uris, u)
	}
	ctx, cancel := context.WithCancel(context.Background())
	acked := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.run(ctx, acked)
	}()
	t.Cleanup(func() { cancel(); <-done })
	testenv.Receive(t, testenv.Wait, "the listen stream acknowledged", acked)
	return l
}

// run listens until ctx ends: a stream refused (no replica yet, or a replica answering
// an error) is asked for again at a pace; one that ended (its replica lost) is reported
// on lost and opened again once gate is closed.
func (l *listener) run(ctx context.Context, acked chan<- struct{}) {
	for first := true; ; {
		err := l.listen(ctx, first, acked)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			select {
			case <-time.After(50 * time.Millisecond): // the retry's pace, not a wait for an event
				continue
			case <-ctx.Done():
				return
			}
		}
		select {
		case l.lost <- time.Now():
		default:
		}
		select {
		case <-l.gate:
		case <-ctx.Done():
			return
		}
		first = false
	}
}

// listen opens one stream naming the versions heard and reads it until it ends.
func (l *listener) listen(ctx context.Context, first bool, acked chan<- struct{}) error {
	l.mu.Lock()
	versions := map[string]string{}
	for u, v := range l.heard {
		if v != "" {
			versions[u] = v
		}
	}
	l.mu.Unlock()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": map[string]any{
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "rig", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
			"io.github.jupyter-mcp-sidecar/versions":     versions,
		},
		"notifications": map[string]any{"resourceSubscriptions": l.uris},
	}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", l.auth)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("listen: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				URI  string         `json:"uri"`
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		switch m.Method {
		case "notifications/subscriptions/acknowledged":
			l.mu.Lock()
			if !first {
				l.resumes++
				l.resumedAt = time.Now()
			}
			l.mu.Unlock()
			select {
			case acked <- struct{}{}:
			default:
			}
		case "notifications/resources/updated":
			if l.note != nil {
				l.note(m.Params.URI, time.Now())
			}
			v, _ := m.Params.Meta["io.github.jupyter-mcp-sidecar/version"].(string)
			l.mu.Lock()
			l.heard[m.Params.URI] = v
			l.notes++
			if !first {
				l.toldAfter++
			}
			l.mu.Unlock()
		}
	}
	return nil
}

// state returns a copy of the versions heard and the counters.
func (l *listener) state() (heard map[string]string, notes, resumes, toldAfter int, resumedAt time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	heard = make(map[string]string, len(l.heard))
	for u, v := range l.heard {
		heard[u] = v
	}
	return heard, l.notes, l.resumes, l.toldAfter, l.resumedAt
}
