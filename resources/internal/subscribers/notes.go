package subscribers

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// Note is one notification serialised once, for every subscriber told of it: the
// JSON-RPC message of notifications/resources/updated for a URI, or of
// notifications/resources/list_changed. A listen stream's subscription id is the one
// part that differs between subscribers; Message adds it while it is written.
type Note struct {
	URI    string // "" for list_changed
	json   []byte // the message without a subscription id, ending in "}}"
	fields bool   // params holds a field before the subscription id goes in
}

// newNote serialises notifications/resources/updated for uri.
func newNote(uri string) *Note {
	q, _ := json.Marshal(uri) // a string always encodes
	b := make([]byte, 0, len(updatedHead)+len(q)+2)
	b = append(append(append(b, updatedHead...), q...), "}}"...)
	return &Note{URI: uri, json: b, fields: true}
}

const updatedHead = `{"jsonrpc":"2.0","method":"` + string(mcp.MethodNotificationResourceUpdated) + `","params":{"uri":`

// listChanged is notifications/resources/list_changed, the same for every publish.
var listChanged = &Note{json: []byte(`{"jsonrpc":"2.0","method":"` + string(mcp.MethodNotificationResourcesListChanged) + `","params":{}}`)}

// Message is a Note as one subscriber is to receive it: with a listen stream's
// subscription id, or as it is.
type Message struct {
	Note *Note
	tag  []byte // `,"_meta":{"io.modelcontextprotocol/subscriptionId":ID}`; nil: none
}

// Shared returns the message's JSON when it is the same for every subscriber (no
// subscription id): the Note's own bytes, never to be modified.
func (m Message) Shared() ([]byte, bool) { return m.Note.json, m.tag == nil }

// AppendJSON appends the message's JSON to dst.
func (m Message) AppendJSON(dst []byte) []byte {
	if m.tag == nil {
		return append(dst, m.Note.json...)
	}
	head := m.Note.json[:len(m.Note.json)-2] // up to the params' closing braces
	tag := m.tag
	if !m.Note.fields {
		tag = tag[1:] // no field before it: no comma
	}
	return append(append(append(dst, head...), tag...), "}}"...)
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
	return append(append([]byte(`,"_meta":{"`+mcp.MetaKeySubscriptionID+`":`), q...), '}')
}
