package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
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

func newWebhook(raw map[string]any, deps Deps) (Publisher, error) {
	o := options(raw)
	target, err := o.string("url", true)
	if err != nil {
		return nil, err
	}
	if u, err := url.Parse(target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("option \"url\" must be an http(s) URL, got %q", target)
	}
	timeout, err := o.duration("timeout", 5*time.Second)
	if err != nil {
		return nil, err
	}
	w := &webhook{url: target, client: &http.Client{Timeout: timeout}, headers: map[string]string{}}
	if h, ok := raw["headers"]; ok {
		m, ok := h.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("option \"headers\" must be a map of strings, got %T", h)
		}
		for k, v := range m {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("option \"headers\": %q must be a string", k)
			}
			w.headers[k] = s
		}
	}
	qo, err := readQueueOptions(o)
	if err != nil {
		return nil, err
	}
	if w.queue, err = newQueue("webhook", qo, deps, w.post); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *webhook) post(ctx context.Context, ev Event) error {
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
