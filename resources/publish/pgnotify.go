package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
)

// maxNotifyPayload is below Postgres's 8000-byte NOTIFY payload limit.
const maxNotifyPayload = 7900

// pgnotify sends NOTIFY <channel>, '{"uris": [...]}' so that other processes
// or replicas hear changes. Options: dsn (required), channel ("jupyter_mcp"),
// queue_size, max_retries, backoff. A change too large for one payload is
// split across several notifications. The connection is opened lazily and
// reopened after a failure.
type pgnotify struct {
	*queue
	dsn     string
	channel string

	mu   sync.Mutex
	conn *pgx.Conn
}

func newPGNotify(raw map[string]any, deps Deps) (Publisher, error) {
	o := options(raw)
	dsn, err := o.string("dsn", true)
	if err != nil {
		return nil, err
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return nil, fmt.Errorf("option \"dsn\": %w", err)
	}
	channel, err := o.string("channel", false)
	if err != nil {
		return nil, err
	}
	if channel == "" {
		channel = "jupyter_mcp"
	}
	p := &pgnotify{dsn: dsn, channel: channel}
	qo, err := readQueueOptions(o)
	if err != nil {
		return nil, err
	}
	if p.queue, err = newQueue("pgnotify", qo, deps, p.notify); err != nil {
		return nil, err
	}
	return p, nil
}

// Run delivers until ctx is done, then closes the connection.
func (p *pgnotify) Run(ctx context.Context) error {
	err := p.queue.Run(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		_ = p.conn.Close(context.WithoutCancel(ctx))
		p.conn = nil
	}
	return err
}

// Payloads splits uris into NOTIFY payloads of at most limit bytes each,
// keeping their order.
func Payloads(uris []string, limit int) ([]string, error) {
	var out []string
	var batch []string
	last := ""
	for _, u := range uris {
		data, err := json.Marshal(map[string][]string{"uris": append(slices.Clone(batch), u)})
		if err != nil {
			return nil, fmt.Errorf("encode payload: %w", err)
		}
		if len(data) <= limit {
			batch = append(batch, u)
			last = string(data)
			continue
		}
		if len(batch) == 0 {
			return nil, fmt.Errorf("uri %q alone exceeds the %d-byte NOTIFY payload limit", u, limit)
		}
		out = append(out, last)
		batch = nil
		data, err = json.Marshal(map[string][]string{"uris": {u}})
		if err != nil {
			return nil, fmt.Errorf("encode payload: %w", err)
		}
		if len(data) > limit {
			return nil, fmt.Errorf("uri %q alone exceeds the %d-byte NOTIFY payload limit", u, limit)
		}
		batch = []string{u}
		last = string(data)
	}
	if len(batch) > 0 {
		out = append(out, last)
	}
	return out, nil
}

func (p *pgnotify) notify(ctx context.Context, uris []string) error {
	payloads, err := Payloads(uris, maxNotifyPayload)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		conn, err := pgx.Connect(ctx, p.dsn)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		p.conn = conn
	}
	for _, payload := range payloads {
		if _, err := p.conn.Exec(ctx, "SELECT pg_notify($1, $2)", p.channel, payload); err != nil {
			_ = p.conn.Close(context.WithoutCancel(ctx))
			p.conn = nil
			return fmt.Errorf("notify %s: %w", p.channel, err)
		}
	}
	return nil
}
