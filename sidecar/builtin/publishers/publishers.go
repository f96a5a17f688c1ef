// Package publishers holds the change-event publishers the daemon ships, registered
// with resources/publish by name in init: "webhook" (POST the event's JSON to a URL),
// "pgnotify" (Postgres NOTIFY on a channel) and "sse" (a resumable Server-Sent Events
// stream any number of consumers read). They send every notebook's events (scope
// "all", the default) or only those with URIs (scope "bound"); webhook and pgnotify
// deliver through one bounded, ordered queue with retries. A binary has them by
// importing this package (the command does).
package publishers

import "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"

func init() {
	publish.Register("webhook", newWebhook)
	publish.Register("pgnotify", newPGNotify)
	publish.Register("sse", newSSE)
}
