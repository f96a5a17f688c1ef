package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

// stdioSession is the one client session of the stdio transport.
type stdioSession struct {
	ch    chan mcp.JSONRPCNotification // the SDK's own notifications
	notes *outbox                      // the session's change notifications
	acks  sync.Map                     // subscriptions/listen request id (string or float64) → its held *outbox
}

func (*stdioSession) Initialize()                                           {}
func (*stdioSession) Initialized() bool                                     { return true }
func (s *stdioSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return s.ch }
func (*stdioSession) SessionID() string                                     { return "stdio" }

// stdioTransport serves newline-delimited JSON-RPC on two streams, to the
// one client session they carry.
type stdioTransport struct {
	link   resources.Link
	cfg    Config
	log    *slog.Logger
	mcp    *server.MCPServer
	m      metrics // the HTTP transport's series too: /metrics names the same series whatever the transport
	in     io.Reader
	out    io.Writer
	cancel context.CancelCauseFunc // ends serve; set before the session registers

	writers *writers   // write the outboxes' batches
	wmu     sync.Mutex // one message written at a time
	line    []byte     // the change notifications' line, reused
}

func newStdio(l resources.Link, cfg Config, in io.Reader, out io.Writer) (*stdioTransport, error) {
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &stdioTransport{link: l, cfg: cfg, log: cfg.Logger, mcp: l.MCP(), m: m, in: in, out: out, writers: newWriters()}, nil
}

// Handler is nil: stdio has no HTTP endpoint.
func (*stdioTransport) Handler() http.Handler { return nil }

// errStalled ends the stdio transport whose client stopped reading.
var errStalled = errors.New("stdio client stopped reading notifications")

// SessionStarted registers the stdio session: its notifications go out at
// once. A client that stops reading ends the transport: serve returns
// errStalled, and output that blocks is closed when it can be.
func (t *stdioTransport) SessionStarted(sess server.ClientSession) resources.Sink {
	return sess.(*stdioSession).notes
}

// stalled ends the transport whose client stopped reading.
func (t *stdioTransport) stalled() {
	t.cancel(errStalled)
	if c, ok := t.out.(io.Closer); ok {
		_ = c.Close()
	}
}

// writeLine writes one message, a line.
func (t *stdioTransport) writeLine(b []byte) {
	if _, err := t.out.Write(b); err != nil {
		t.log.Error("cannot write to stdout", "err", err)
	}
}

// writeNotes writes a batch of change notifications: the bytes serialised once, and
// a newline, each.
func (t *stdioTransport) writeNotes(batch []resources.Message) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	for _, m := range batch {
		t.line = append(m.AppendJSON(t.line[:0]), '\n')
		t.writeLine(t.line)
	}
}

// newOutbox returns an outbox writing to stdout, ended by end.
func (t *stdioTransport) newOutbox(era string, end func()) *outbox {
	return newOutbox(era, t.writers, t.writeNotes, end, t.m.delivery, t.log, t.cfg.SendTimeout)
}

// SessionEnded: the stdio session ends with Serve.
func (*stdioTransport) SessionEnded(string) {}

// Serve serves newline-delimited JSON-RPC on the stdio streams until ctx is
// done or the input ends. Each message is handled concurrently (a
// subscriptions/listen request lasts as long as its stream); responses and
// notifications are written whole, one per line.
func (t *stdioTransport) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t.cancel = cancel
	sess := &stdioSession{ch: make(chan mcp.JSONRPCNotification, 1024), notes: t.newOutbox(era20251125, t.stalled)}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer sess.notes.stopWait()
	if err := t.mcp.RegisterSession(ctx, sess); err != nil {
		return fmt.Errorf("register stdio session: %w", err)
	}
	defer t.mcp.UnregisterSession(context.WithoutCancel(ctx), sess.SessionID())

	write := func(msg any) {
		b, err := json.Marshal(msg)
		if err != nil {
			t.log.Error("cannot encode stdio message", "err", err)
			return
		}
		t.wmu.Lock()
		defer t.wmu.Unlock()
		t.writeLine(append(b, '\n'))
	}
	wg.Go(func() {
		for {
			select {
			case n := <-sess.ch:
				write(n)
				if n.Method == string(mcp.MethodNotificationSubscriptionsAcknowledged) {
					if o, ok := sess.acks.LoadAndDelete(n.Params.Meta[mcp.MetaKeySubscriptionID]); ok {
						o.(*outbox).release()
					}
				}
			case <-ctx.Done():
				return
			}
		}
	})

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() { readErr <- t.readLines(ctx, lines, write) }()
	for {
		select {
		case <-ctx.Done():
			if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
				return cause
			}
			return nil
		case err := <-readErr:
			cancel(nil)
			return err
		case line := <-lines:
			wg.Go(func() { t.handle(ctx, sess, line, write) })
		}
	}
}

// readLines sends each input line to lines; a line over MaxRequestBytes is
// answered with an error and skipped.
func (t *stdioTransport) readLines(ctx context.Context, lines chan<- []byte, write func(any)) error {
	limit := t.cfg.MaxRequestBytes
	r := bufio.NewReaderSize(t.in, 64<<10)
	for {
		line, tooLong, err := readLine(r, limit)
		if tooLong {
			write(rpcError(mcp.INVALID_REQUEST, fmt.Sprintf("message exceeds %d bytes", limit)))
		} else if len(bytes.TrimSpace(line)) > 0 {
			select {
			case lines <- line:
			case <-ctx.Done():
				return nil
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
	}
}

// readLine reads one newline-terminated line of at most limit bytes; a longer
// one is consumed and reported as tooLong.
func readLine(r *bufio.Reader, limit int64) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			line = append(line, chunk...)
			if int64(len(line)) > limit {
				tooLong, line = true, nil
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, tooLong, err
		}
	}
}

// handle handles one message, patching resources/read responses.
func (t *stdioTransport) handle(ctx context.Context, sess *stdioSession, line []byte, write func(any)) {
	defer func() {
		if p := recover(); p != nil {
			t.log.Error("panic serving stdio message", "panic", p)
			write(rpcError(mcp.INTERNAL_ERROR, "internal error"))
		}
	}()
	if isBatch(line) {
		write(errBatch)
		return
	}
	ctx, o := resources.WithReadOutcome(t.mcp.WithContext(ctx, sess))
	var env struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
	}
	if json.Unmarshal(line, &env) == nil && (env.Method == string(mcp.MethodResourcesSubscribe) || env.Method == string(mcp.MethodResourcesRead)) {
		var req struct {
			Params resources.URIParams `json:"params"`
		}
		_ = json.Unmarshal(line, &req)
		admit := func() *resources.Refusal { return t.link.AdmitRead(req.Params) }
		if env.Method == string(mcp.MethodResourcesSubscribe) {
			admit = func() *resources.Refusal { return t.link.AdmitSubscribe(ctx, sess.SessionID(), req.Params) }
		}
		if ref := admit(); ref != nil {
			write(ref.Answer(env.ID))
			return
		}
	}
	if env.Method == string(mcp.MethodSubscriptionsListen) {
		var end context.CancelFunc
		ctx, end = context.WithCancel(ctx)
		defer end()
		o := t.newOutbox(era20260728, end)
		switch env.ID.(type) {
		case string, float64: // a valid id; one already in flight is not held
			if _, dup := sess.acks.LoadOrStore(env.ID, o); !dup {
				defer sess.acks.CompareAndDelete(env.ID, o)
				o.held = true
			}
		}
		defer o.stopWait()
		ctx = resources.WithListenSink(ctx, o)
	}
	if resp := t.mcp.HandleMessage(ctx, line); resp != nil {
		write(patchResponse(resp, o, t.log))
	}
}
