package subscribers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// newRegistry is a Registry, its gauges on reg.
func newRegistry(t *testing.T, reg prometheus.Registerer) *Registry {
	t.Helper()
	r, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sink is a Sink that keeps what it is handed, up to its capacity.
type sink chan Message

func (s sink) Notify(m Message) { s <- m }

func drain(ch sink) []string {
	var out []string
	for {
		select {
		case n := <-ch:
			out = append(out, n.Note.URI)
		default:
			return out
		}
	}
}

// Two registries on one Registerer (hub mode's users) move the same gauges: the series
// are the sums of what each registry's Stats reports, and go back to 0 as each is left.
func TestRegistryGaugesAreShared(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	a, b := newRegistry(t, reg), newRegistry(t, reg)
	check := func(what string, sessions, listens, subscriptions float64) {
		t.Helper()
		for _, r := range []*Registry{a, b} {
			got := []float64{testutil.ToFloat64(r.m.sessions.WithLabelValues(Era20251125)),
				testutil.ToFloat64(r.m.sessions.WithLabelValues(Era20260728)), testutil.ToFloat64(r.m.subscriptions)}
			if want := []float64{sessions, listens, subscriptions}; !slices.Equal(got, want) {
				t.Fatalf("%s: sessions, listen streams, subscriptions = %v, want %v", what, got, want)
			}
		}
		var sum [3]int
		for _, r := range []*Registry{a, b} {
			perEra, subs := r.Stats()
			sum[0], sum[1], sum[2] = sum[0]+perEra[Era20251125], sum[1]+perEra[Era20260728], sum[2]+subs
		}
		if got := [3]float64{float64(sum[0]), float64(sum[1]), float64(sum[2])}; got != [3]float64{sessions, listens, subscriptions} {
			t.Fatalf("%s: the registries' Stats sum to %v", what, got)
		}
	}
	ch := make(sink, 8)
	a.AddSession("s1", ch)
	b.AddSession("s1", ch)
	for _, u := range []string{"notebook://a", "notebook://b", "notebook://a"} { // once each
		a.Subscribe(SessionKey("s1"), u)
	}
	b.Subscribe(SessionKey("s1"), "notebook://c")
	l := b.AddListen(ch, 1, []string{"notebook://x", "notebook://y"}, false)
	check("opened", 2, 1, 5)
	a.Unsubscribe(SessionKey("s1"), "notebook://b")
	a.Unsubscribe(SessionKey("s1"), "notebook://never")
	check("unsubscribed", 2, 1, 4)
	a.AddSession("s1", ch) // the same id again replaces the session
	check("replaced", 2, 1, 3)
	b.Remove(l)
	b.Remove(l)
	a.Remove(SessionKey("s1"))
	check("one session left", 1, 0, 1)
	b.Remove(SessionKey("s1"))
	check("all gone", 0, 0, 0)
}

func TestRegistryListenTagsSubscriptionID(t *testing.T) {
	r := newRegistry(t, nil)
	ch := make(sink, 10)
	key := r.AddListen(ch, "listen:7", []string{"notebook://w/cells/c1"}, false)
	_ = r.Publish(context.Background(), []string{"notebook://w", "notebook://w/cells/c1"}, "")
	var n mcp.JSONRPCNotification
	if err := json.Unmarshal((<-ch).AppendJSON(nil), &n); err != nil {
		t.Fatal(err)
	}
	if n.Method != string(mcp.MethodNotificationResourceUpdated) || n.Params.Meta[mcp.MetaKeySubscriptionID] != "listen:7" || n.Params.AdditionalFields["uri"] != "notebook://w/cells/c1" {
		t.Fatalf("notification %+v", n)
	}
	if len(ch) != 0 {
		t.Fatal("notified for a URI not subscribed")
	}
	r.Remove(key)
	if perEra, _ := r.Stats(); perEra[Era20260728] != 0 {
		t.Fatal("listen stream not removed")
	}
}

// Admit keeps a session within its subscription count and byte budget; a URI
// already held is admitted again, and an unsubscribe frees its bytes.
func TestRegistryAdmitLimits(t *testing.T) {
	const maxN, maxBytes = 3, 10
	r := newRegistry(t, nil)
	r.AddSession("s1", make(sink, 1))
	key := SessionKey("s1")
	for i, tt := range []struct {
		unsubscribe bool
		uri         string
		want        error
		n, bytes    int // held afterwards
	}{
		{uri: "aaaa", n: 1, bytes: 4},
		{uri: "bbbb", n: 2, bytes: 8},
		{uri: "aaaa", n: 2, bytes: 8}, // held: admitted, not counted twice
		{uri: "cccc", want: ErrSubscriptionBytes, n: 2, bytes: 8},
		{uri: "cc", n: 3, bytes: 10}, // exactly the budget
		{uri: "d", want: ErrSubscriptions, n: 3, bytes: 10},
		{unsubscribe: true, uri: "bbbb", n: 2, bytes: 6},
		{unsubscribe: true, uri: "never", n: 2, bytes: 6},
		{uri: "cccc", n: 3, bytes: 10},
	} {
		var err error
		if tt.unsubscribe {
			r.Unsubscribe(key, tt.uri)
		} else {
			err = r.Admit(key, tt.uri, maxN, maxBytes)
		}
		n, b, _ := r.Subscriptions(key, "")
		if !errors.Is(err, tt.want) || n != tt.n || b != tt.bytes {
			t.Errorf("step %d (%q): %v, %d URIs of %d bytes; want %v, %d of %d", i, tt.uri, err, n, b, tt.want, tt.n, tt.bytes)
		}
	}
	if err := r.Admit("s:unknown", "x", maxN, maxBytes); err != nil {
		t.Errorf("Admit for an unknown session: %v", err)
	}
}

// A notification is serialised once, whoever is told: every subscriber is handed the
// same Note, the sessions the very same bytes, a listen stream those bytes with its
// subscription id; and a publish allocates the same whether two or two hundred
// subscribers are told (mcp-go's notification path marshalled it once per session).
func TestPublishSerialisesOnce(t *testing.T) {
	const uri = "notebook://w/cells/c1"
	r := newRegistry(t, nil)
	a, b, l := make(sink, 1), make(sink, 1), make(sink, 1)
	r.AddSession("a", a)
	r.AddSession("b", b)
	r.Subscribe(SessionKey("a"), uri)
	r.Subscribe(SessionKey("b"), uri)
	r.AddListen(l, 7.0, []string{uri}, false)
	_ = r.Publish(context.Background(), []string{uri}, "")
	ma, mb, ml := <-a, <-b, <-l
	ja, sharedA := ma.Shared()
	jb, sharedB := mb.Shared()
	if !sharedA || !sharedB || &ja[0] != &jb[0] || ma.Note != ml.Note {
		t.Fatalf("two sessions and a listen stream were handed different notifications: %p %p %p", ma.Note, mb.Note, ml.Note)
	}
	if _, shared := ml.Shared(); shared {
		t.Fatal("a listen stream's notification has no subscription id")
	}
	for i, m := range []Message{ma, ml} {
		var n mcp.JSONRPCNotification
		if err := json.Unmarshal(m.AppendJSON(nil), &n); err != nil {
			t.Fatalf("%s: %v", m.AppendJSON(nil), err)
		}
		if n.Method != string(mcp.MethodNotificationResourceUpdated) || n.Params.AdditionalFields["uri"] != uri {
			t.Fatalf("notification %s", m.AppendJSON(nil))
		}
		if id, tagged := n.Params.Meta[mcp.MetaKeySubscriptionID]; tagged != (i == 1) || (tagged && id != 7.0) {
			t.Fatalf("notification %s: subscription id %v", m.AppendJSON(nil), id)
		}
	}

	allocs := func(subscribers int) float64 {
		r := newRegistry(t, nil)
		chs := make([]sink, subscribers)
		for i := range chs {
			chs[i] = make(sink, 4)
			r.AddSession(fmt.Sprint(i), chs[i])
			r.Subscribe(SessionKey(fmt.Sprint(i)), uri)
		}
		return testing.AllocsPerRun(50, func() {
			_ = r.Publish(context.Background(), []string{uri}, "")
			for _, ch := range chs {
				<-ch
			}
		})
	}
	// A slice of the subscribers may take one more allocation; one per subscriber is 198.
	if few, many := allocs(2), allocs(200); many-few >= 10 {
		t.Fatalf("a publish to 200 subscribers allocates %v times, to 2 %v: something is made per subscriber", many, few)
	}
}

// Only the subscribers of a URI are told of it, and nothing once unsubscribed or
// removed; list_changed goes to the sessions and to the listen streams that asked.
func TestRegistryTellsTheSubscribed(t *testing.T) {
	r := newRegistry(t, nil)
	s, l, quiet := make(sink, 10), make(sink, 10), make(sink, 10)
	r.AddSession("s1", s)
	r.Subscribe(SessionKey("s1"), "notebook://w")
	r.AddListen(l, 1.0, []string{"notebook://w"}, true)
	r.AddListen(quiet, 2.0, []string{"notebook://other"}, false)
	_ = r.Publish(context.Background(), []string{"notebook://w", "notebook://x"}, "")
	if got, gotL, gotQ := drain(s), drain(l), drain(quiet); !slices.Equal(got, []string{"notebook://w"}) || !slices.Equal(gotL, got) || len(gotQ) != 0 {
		t.Fatalf("told %v, %v and %v; want notebook://w twice", got, gotL, gotQ)
	}
	r.ListChanged()
	if got, gotL, gotQ := drain(s), drain(l), drain(quiet); len(got) != 1 || len(gotL) != 1 || len(gotQ) != 0 {
		t.Fatalf("list_changed told %v, %v, %v; want the session and the listen stream that asked", got, gotL, gotQ)
	}
	r.Unsubscribe(SessionKey("s1"), "notebook://w")
	r.Remove(SessionKey("s1"))
	_ = r.Publish(context.Background(), []string{"notebook://w"}, "")
	r.ListChanged()
	if got := drain(s); len(got) != 0 {
		t.Fatalf("told after unsubscribe and removal: %v", got)
	}
}
