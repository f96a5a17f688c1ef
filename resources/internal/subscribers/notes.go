package subscribers

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// VersionKey is the _meta member of notifications/resources/updated that carries the
// version of the notebook the resource is of (resources.VersionKey).
const VersionKey = "io.github.jupyter-mcp-sidecar/version"

// Note is one notification serialised once, for every subscriber told of it: the
// JSON-RPC message of notifications/resources/updated for a URI (with the notebook's
// version in _meta), or of notifications/resources/list_changed. A listen stream's
// subscription id is the one part that differs between subscribers; Message adds it to
// the _meta while it is written.
type Note struct {
	URI    string // "" for list_changed
	json   []byte // the message without a subscription id, ending in "}}" (or "}}}" with meta)
	fields bool   // params holds a field before the subscription id goes in
	meta   bool   // params ends with a _meta object, which the subscription id joins
}

// newNote serialises notifications/resources/updated for uri, its notebook at version
// ("" for none).
func newNote(uri, version string) *Note {
	q, _ := json.Marshal(uri) // a string always encodes
	b := make([]byte, 0, len(updatedHead)+len(q)+len(version)+64)
	b = append(append(b, updatedHead...), q...)
	if version == "" {
		return &Note{URI: uri, json: append(b, "}}"...), fields: true}
	}
	v, _ := json.Marshal(version)
	b = append(append(append(b, `,"_meta":{"`+VersionKey+`":`...), v...), "}}}"...)
	return &Note{URI: uri, json: b, fields: true, meta: true}
}

const updatedHead = `{"jsonrpc":"2.0","method":"` + string(mcp.MethodNotificationResourceUpdated) + `","params":{"uri":`

// listChanged is notifications/resources/list_changed, the same for every publish.
var listChanged = &Note{json: []byte(`{"jsonrpc":"2.0","method":"` + string(mcp.MethodNotificationResourcesListChanged) + `","params":{}}`)}

// Message is a Note as one subscriber is to receive it: with a listen stream's
// subscription id, or as it is.
type Message struct {
	Note *Note
	tag  []byte // `"io.modelcontextprotocol/subscriptionId":ID`; nil: none
}

// Shared returns the message's JSON when it is the same for every subscriber (no
// subscription id): the Note's own bytes, never to be modified.
func (m Message) Shared() ([]byte, bool) { return m.Note.json, m.tag == nil }

// AppendJSON appends the message's JSON to dst.
func (m Message) AppendJSON(dst []byte) []byte {
	j := m.Note.json
	switch {
	case m.tag == nil:
		return append(dst, j...)
	case m.Note.meta: // into the _meta object, before its closing brace
		dst = append(append(append(dst, j[:len(j)-3]...), ','), m.tag...)
		return append(dst, "}}}"...)
	}
	dst = append(dst, j[:len(j)-2]...) // up to the params' closing braces
	if m.Note.fields {
		dst = append(dst, ',')
	}
	dst = append(append(dst, `"_meta":{`...), m.tag...)
	return append(dst, "}}}"...)
}

// subscriptionTag is the _meta member that tags a listen stream's notifications with
// its subscription id, serialised once for the stream (nil for no id).
func subscriptionTag(id any) []byte {
	if id == nil {
		return nil
	}
	q, err := json.Marshal(id)
	if err != nil { // an id is a string or a number
		q = []byte("null")
	}
	return append([]byte(`"`+mcp.MetaKeySubscriptionID+`":`), q...)
}
