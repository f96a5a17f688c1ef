package publishers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
)

// webhook POSTs each event's JSON to a URL, one request at a time, in order.
// Options: url (required), timeout ("5s"), headers (map of string), scope
// ("all" or "bound"), queue_size (1024), max_retries (5), backoff ("100ms",
// doubled per retry). A 2xx answer is delivery; anything else is retried.
type webhook struct {
	*queue
	url     string
	headers map[string]string
	client  *http.Client
}

// webhookOptions are the webhook publisher's options.
type webhookOptions struct {
	URL     string            `option:"url"`
	Timeout time.Duration     `option:"timeout"`
	Headers map[string]string `option:"headers"`
	Queue   queueOptions      `option:",squash"`
}

func newWebhook(raw map[string]any, deps publish.Deps) (publish.Publisher, error) {
	o := webhookOptions{Timeout: 5 * time.Second, Queue: defaultQueue}
	if err := option.Decode(raw, &o); err != nil {
		return nil, err
	}
	if o.URL == "" {
		return nil, errors.New(`option "url" is required`)
	}
	if u, err := url.Parse(o.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("option \"url\" must be an http(s) URL, got %q", o.URL)
	}
	w := &webhook{url: o.URL, client: &http.Client{Timeout: o.Timeout}, headers: o.Headers}
	var err error
	if w.queue, err = newQueue("webhook", o.Queue, deps, w.post); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *webhook) post(ctx context.Context, ev publish.Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode webhook body: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range w.headers {
		req.Header.Set(k, v)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("post webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}
