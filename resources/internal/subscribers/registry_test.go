package subscribers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// newRegistry is a Registry with a 1 s send timeout, its metrics on reg.
func newRegistry(t *testing.T, reg prometheus.Registerer) *Registry {
	t.Helper()
	r, err := New(Config{SendTimeout: time.Second, Logger: quietLog, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func drain(ch chan Message) []string {
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

func TestRegistryFullChannelRetriesThenEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, nil)
		ch := make(chan Message, 2)
		ended := make(chan struct{})
		r.AddSession("s1", ch, false, func() { close(ended) })
		uris := []string{"notebook://w", "notebook://w/cells/a", "notebook://w/cells/b", "notebook://w/cells/c"}
		for _, u := range uris {
			r.Subscribe(SessionKey("s1"), u)
		}
		_ = r.Publish(context.Background(), uris)
		got := drain(ch)
		if len(got) != 2 {
			t.Fatalf("first hand-off = %v, want the channel's capacity", got)
		}
		time.Sleep(2 * retryFlush)
		synctest.Wait()
		got = append(got, drain(ch)...)
		if len(got) != 4 {
			t.Fatalf("after a retry = %v, want all four in order", got)
		}
		for i, u := range uris {
			if got[i] != u {
				t.Fatalf("order %v", got)
			}
		}
		// A session that never reads is ended after the send timeout, and forgotten.
		_ = r.Publish(context.Background(), uris)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case <-ended:
		default:
			t.Fatal("a stuck session was not ended")
		}
		if perEra, subs, _ := r.Stats(); subs != 0 || perEra[Era20251125] != 0 {
			t.Fatalf("%d subscriptions, %v sessions left after ending a stuck session", subs, perEra)
		}
		if d := testutil.ToFloat64(r.m.dropped.WithLabelValues(Era20251125)); d != 2 {
			t.Fatalf("dropped = %v, want the 2 that never fit", d)
		}
		if e := testutil.ToFloat64(r.m.ended.WithLabelValues(Era20251125)); e != 1 {
			t.Fatalf("ended = %v, want 1", e)
		}
		r.Remove(SessionKey("s1")) // the session's own unregistration comes later: harmless
		if n, subs := testutil.ToFloat64(r.m.sessions.WithLabelValues(Era20251125)), testutil.ToFloat64(r.m.subscriptions); n != 0 || subs != 0 {
			t.Fatalf("gauges: %v sessions, %v subscriptions after ending a stuck session; want 0", n, subs)
		}
	})
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
			perEra, subs, _ := r.Stats()
			sum[0], sum[1], sum[2] = sum[0]+perEra[Era20251125], sum[1]+perEra[Era20260728], sum[2]+subs
		}
		if got := [3]float64{float64(sum[0]), float64(sum[1]), float64(sum[2])}; got != [3]float64{sessions, listens, subscriptions} {
			t.Fatalf("%s: the registries' Stats sum to %v", what, got)
		}
	}
	ch := make(chan Message, 8)
	a.AddSession("s1", ch, false, nil)
	b.AddSession("s1", ch, false, nil)
	for _, u := range []string{"notebook://a", "notebook://b", "notebook://a"} { // once each
		a.Subscribe(SessionKey("s1"), u)
	}
	b.Subscribe(SessionKey("s1"), "notebook://c")
	l := b.AddListen(ch, 1, []string{"notebook://x", "notebook://y"}, false, false, nil)
	check("opened", 2, 1, 5)
	a.Unsubscribe(SessionKey("s1"), "notebook://b")
	a.Unsubscribe(SessionKey("s1"), "notebook://never")
	check("unsubscribed", 2, 1, 4)
	a.AddSession("s1", ch, false, nil) // the same id again replaces the session
	check("replaced", 2, 1, 3)
	b.Remove(l)
	b.Remove(l)
	a.Remove(SessionKey("s1"))
	check("one session left", 1, 0, 1)
	b.Remove(SessionKey("s1"))
	check("all gone", 0, 0, 0)
}

// A held listen stream queues its changes, coalesced, until it is released.
func TestRegistryHeldListenWaitsForRelease(t *testing.T) {
	r := newRegistry(t, nil)
	ch := make(chan Message, 10)
	key := r.AddListen(ch, 1.0, []string{"notebook://w"}, false, true, nil)
	for range 3 {
		_ = r.Publish(context.Background(), []string{"notebook://w"})
	}
	if got := drain(ch); len(got) != 0 {
		t.Fatalf("held stream sent %v", got)
	}
	r.Release(key)
	if got := drain(ch); len(got) != 1 {
		t.Fatalf("released stream sent %v, want one coalesced notification", got)
	}
	r.Remove(key)
}

// The registry fills at most three quarters of an SDK channel.
func TestRegistryLeavesRoomForTheSDK(t *testing.T) {
	r := newRegistry(t, nil)
	ch := make(chan Message, 8)
	key := r.AddListen(ch, 1.0, nil, false, false, nil)
	var uris []string
	for i := range 10 {
		uris = append(uris, fmt.Sprintf("notebook://w/cells/c%d", i))
		r.Subscribe(key, uris[i])
	}
	_ = r.Publish(context.Background(), uris)
	if len(ch) != 6 {
		t.Fatalf("registry queued %d of a channel of 8, want 6", len(ch))
	}
	r.Remove(key)
}

func TestRegistryGatedCoalesces(t *testing.T) {
	r := newRegistry(t, nil)
	ch := make(chan Message, 100)
	r.AddSession("s1", ch, true, nil)
	r.Subscribe(SessionKey("s1"), "notebook://w")
	r.Unsubscribe(SessionKey("s1"), "notebook://never") // not an error
	if n, b, has := r.Subscriptions(SessionKey("s1"), "notebook://w"); n != 1 || b != len("notebook://w") || !has {
		t.Fatalf("Subscriptions = %d, %d, %v; want 1, %d, true", n, b, has, len("notebook://w"))
	}
	_ = r.Publish(context.Background(), []string{"notebook://w"})
	if got := drain(ch); len(got) != 0 {
		t.Fatalf("sent without a GET stream: %v", got)
	}
	r.StreamOpened("s1")
	if got := drain(ch); len(got) != 1 {
		t.Fatalf("opening the GET stream sent %v, want the pending one", got)
	}
	r.PostStarted("s1", time.Millisecond)
	for range 10 {
		_ = r.Publish(context.Background(), []string{"notebook://w", "notebook://other"})
	}
	if got := drain(ch); len(got) != 0 {
		t.Fatalf("sent while a POST was in flight: %v", got)
	}
	r.PostEnded("s1")
	if got := drain(ch); len(got) != 1 || got[0] != "notebook://w" {
		t.Fatalf("after the POST = %v, want one coalesced notification", got)
	}
	r.Unsubscribe(SessionKey("s1"), "notebook://w")
	_ = r.Publish(context.Background(), []string{"notebook://w"})
	if got := drain(ch); len(got) != 0 {
		t.Fatalf("sent after unsubscribe: %v", got)
	}
}

func TestRegistryListenTagsSubscriptionID(t *testing.T) {
	r := newRegistry(t, nil)
	ch := make(chan Message, 10)
	key := r.AddListen(ch, "listen:7", []string{"notebook://w/cells/c1"}, false, false, nil)
	_ = r.Publish(context.Background(), []string{"notebook://w", "notebook://w/cells/c1"})
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
	if perEra, _, _ := r.Stats(); perEra[Era20260728] != 0 {
		t.Fatal("listen stream not removed")
	}
}

// listenBody is a 2026-07-28 subscriptions/listen request for uri with the given id.

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// Admit keeps a session within its subscription count and byte budget; a URI
// already held is admitted again, and an unsubscribe frees its bytes.
func TestRegistryAdmitLimits(t *testing.T) {
	const maxN, maxBytes = 3, 10
	r := newRegistry(t, nil)
	r.AddSession("s1", make(chan Message, 1), true, nil)
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
	a, b, l := make(chan Message, 1), make(chan Message, 1), make(chan Message, 1)
	r.AddSession("a", a, false, nil)
	r.AddSession("b", b, false, nil)
	r.Subscribe(SessionKey("a"), uri)
	r.Subscribe(SessionKey("b"), uri)
	r.AddListen(l, 7.0, []string{uri}, false, false, nil)
	_ = r.Publish(context.Background(), []string{uri})
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
		chs := make([]chan Message, subscribers)
		for i := range chs {
			chs[i] = make(chan Message, 4)
			r.AddSession(fmt.Sprint(i), chs[i], false, nil)
			r.Subscribe(SessionKey(fmt.Sprint(i)), uri)
		}
		return testing.AllocsPerRun(50, func() {
			_ = r.Publish(context.Background(), []string{uri})
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
