package sidecar

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

// Single mode's endpoint holds a request until the server has loaded its name
// bindings: the front listens before the server runs, and a read must not miss a
// bound name.
func TestEndpointWaitsForTheNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := resources.New(resources.Config{
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := afterLoad(srv, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
		rec := httptest.NewRecorder()
		served := make(chan struct{})
		go func() { defer close(served); h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil)) }()
		synctest.Wait()
		select {
		case <-served:
			t.Fatal("the request was served before the names were loaded")
		default:
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		<-served
		if rec.Code != http.StatusTeapot {
			t.Fatalf("status %d after the names loaded", rec.Code)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
