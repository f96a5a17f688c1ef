package publishers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
)

// MaxNotifyPayload is the largest payload pgnotify sends, below Postgres's
// 8000-byte NOTIFY payload limit.
const MaxNotifyPayload = 7900

// pgnotify sends each event as NOTIFY <channel>, '<event JSON>' so that other
// processes or replicas hear changes. Options: dsn (required), channel
// ("jupyter_mcp"), scope ("all" or "bound"), queue_size, max_retries, backoff.
// An event too large for one payload is split into parts (Event.Payloads),
// notified in one transaction: a listener gets all of them, in order, or none.
// The connection is opened lazily and reopened after a failure.
type pgnotify struct {
	*queue
	dsn     string
	channel string

	mu   sync.Mutex
	conn *pgx.Conn
}

// pgnotifyOptions are the pgnotify publisher's options.
type pgnotifyOptions struct {
	DSN     string       `option:"dsn"`
	Channel string       `option:"channel"`
	Queue   queueOptions `option:",squash"`
}

func newPGNotify(raw map[string]any, deps publish.Deps) (publish.Publisher, error) {
	o := pgnotifyOptions{Queue: defaultQueue}
	if err := option.Decode(raw, &o); err != nil {
		return nil, err
	}
	if o.DSN == "" {
		return nil, errors.New(`option "dsn" is required`)
	}
	if _, err := pgx.ParseConfig(o.DSN); err != nil {
		return nil, fmt.Errorf("option \"dsn\": %w", err)
	}
	p := &pgnotify{dsn: o.DSN, channel: cmp.Or(o.Channel, "jupyter_mcp")}
	var err error
	if p.queue, err = newQueue("pgnotify", o.Queue, deps, p.notify); err != nil {
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

func (p *pgnotify) notify(ctx context.Context, ev publish.Event) error {
	payloads, err := ev.Payloads(MaxNotifyPayload)
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
	if len(payloads) == 1 {
		_, err = p.conn.Exec(ctx, "SELECT pg_notify($1, $2)", p.channel, string(payloads[0]))
	} else {
		err = pgx.BeginFunc(ctx, p.conn, notifyAll(ctx, p.channel, payloads))
	}
	if err != nil {
		_ = p.conn.Close(context.WithoutCancel(ctx))
		p.conn = nil
		return fmt.Errorf("notify %s: %w", p.channel, err)
	}
	return nil
}

// notifyAll sends every payload in one transaction, so they arrive together and in order.
func notifyAll(ctx context.Context, channel string, payloads [][]byte) func(pgx.Tx) error {
	return func(tx pgx.Tx) error {
		for _, payload := range payloads {
			if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", channel, string(payload)); err != nil {
				return err
			}
		}
		return nil
	}
}
