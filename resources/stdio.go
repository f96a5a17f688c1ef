package resources

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// stdioSession is the one client session of the stdio transport.
type stdioSession struct {
	ch   chan mcp.JSONRPCNotification
	acks sync.Map // subscriptions/listen request id (string or float64) → *ackWait
}

func (*stdioSession) Initialize()                                           {}
func (*stdioSession) Initialized() bool                                     { return true }
func (s *stdioSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return s.ch }
func (*stdioSession) SessionID() string                                     { return "stdio" }

// serveStdio serves newline-delimited JSON-RPC on the stdio streams until
// ctx is done or the input ends. Each message is handled concurrently (a
// subscriptions/listen request lasts as long as its stream); responses and
// notifications are written whole, one per line.
func (s *Server) serveStdio(ctx context.Context) error {
	sess := &stdioSession{ch: make(chan mcp.JSONRPCNotification, 1024)}
	if err := s.mcp.RegisterSession(ctx, sess); err != nil {
		return fmt.Errorf("register stdio session: %w", err)
	}
	defer s.mcp.UnregisterSession(context.WithoutCancel(ctx), sess.SessionID())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var wmu sync.Mutex
	write := func(msg any) {
		b, err := json.Marshal(msg)
		if err != nil {
			s.log.Error("cannot encode stdio message", "err", err)
			return
		}
		wmu.Lock()
		defer wmu.Unlock()
		if _, err := s.stdout.Write(append(b, '\n')); err != nil {
			s.log.Error("cannot write to stdout", "err", err)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for {
			select {
			case n := <-sess.ch:
				write(n)
				if n.Method == string(mcp.MethodNotificationSubscriptionsAcknowledged) {
					if a, ok := sess.acks.LoadAndDelete(n.Params.Meta[mcp.MetaKeySubscriptionID]); ok {
						a.(*ackWait).wrote()
					}
				}
			case <-ctx.Done():
				return
			}
		}
	})

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() { readErr <- s.readLines(ctx, lines, write) }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			cancel()
			return err
		case line := <-lines:
			wg.Go(func() { s.handleStdio(ctx, sess, line, write) })
		}
	}
}

// readLines sends each input line to lines; a line over MaxRequestBytes is
// answered with an error and skipped.
func (s *Server) readLines(ctx context.Context, lines chan<- []byte, write func(any)) error {
	r := bufio.NewReaderSize(s.stdin, 64<<10)
	for {
		line, tooLong, err := readLine(r, s.cfg.MaxRequestBytes)
		if tooLong {
			write(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(nil),
				Error: mcp.NewJSONRPCErrorDetails(mcp.INVALID_REQUEST, fmt.Sprintf("message exceeds %d bytes", s.cfg.MaxRequestBytes), nil)})
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

// handleStdio handles one message, patching resources/read responses.
func (s *Server) handleStdio(ctx context.Context, sess *stdioSession, line []byte, write func(any)) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic serving stdio message", "panic", p)
			write(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(nil),
				Error: mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, "internal error", nil)})
		}
	}()
	ctx, o := withOutcome(s.mcp.WithContext(ctx, sess))
	var env struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
	}
	if json.Unmarshal(line, &env) == nil && env.Method == string(mcp.MethodSubscriptionsListen) {
		switch env.ID.(type) {
		case string, float64: // a valid id; one already in flight is not held
			aw := &ackWait{}
			if _, dup := sess.acks.LoadOrStore(env.ID, aw); !dup {
				defer sess.acks.CompareAndDelete(env.ID, aw)
				ctx = withAckWait(ctx, aw)
			}
		}
	}
	resp := s.mcp.HandleMessage(ctx, line)
	if resp == nil {
		return
	}
	if o.uri == "" {
		write(resp)
		return
	}
	b, err := json.Marshal(resp)
	if err == nil {
		b, err = patchMessage(b, o)
	}
	if err != nil {
		s.log.Error("cannot patch resources/read response; sending it as is", "err", err)
		write(resp)
		return
	}
	write(json.RawMessage(b))
}
