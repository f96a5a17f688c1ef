package hub

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/browser"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// listenRedirect is an OAuth client's loopback redirect URI, http://127.0.0.1:PORT/cb:
// it answers each request to it and hands over the query (the authorization response).
func listenRedirect(t *testing.T) (string, <-chan url.Values) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan url.Values, 16)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cb" {
			http.NotFound(w, r)
			return
		}
		select {
		case got <- r.URL.Query():
		default:
		}
		_, _ = io.WriteString(w, "Logged in: you may close this page.")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/cb", got
}

// hubLogin is where a person's login in Chromium ended (hublogin.mjs's reply).
type hubLogin struct {
	URL         string            `json:"url"`
	Seen        []string          `json:"seen"` // the pages the person filled: the Hub's "login", "authorize", the sidecar's "consent"
	Status      int               `json:"status"`
	Text        string            `json:"text"`
	Form        map[string]string `json:"form"`        // the consent form's hidden fields, where the login stopped there
	Intercepted []string          `json:"intercepted"` // the URLs requested at the "intercept" prefix
}

// logIn has a new person in people's Chromium open authorizeURL and log in at the Hub as
// user, approving there and on the sidecar's consent page, until the browser leaves for
// until. more sets the login command's other fields: "consent" ("deny", or "none" to
// stop at the page), "session" (the person's browser, kept from one login to the next).
func logIn(t *testing.T, people *jupytertest.Client, authorizeURL, user, until string, more ...map[string]any) hubLogin {
	t.Helper()
	cmd := map[string]any{"op": "login", "url": authorizeURL, "user": user, "until": until}
	for _, m := range more {
		maps.Copy(cmd, m)
	}
	r := people.Do(cmd)
	b, _ := json.Marshal(r)
	var l hubLogin
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// oauthClient is a client registered at the sidecar, with one PKCE pair: the
// authorization request and the token request it makes.
type oauthClient struct {
	issuer, resource, id, redirect, verifier, challenge string
	approvedBy                                          map[string]bool // the users who approved it on the consent page
}

func newOAuthClient(t *testing.T, issuer, resource, id, redirect string) oauthClient {
	v, c := pkcePair(t)
	return oauthClient{issuer: issuer, resource: resource, id: id, redirect: redirect, verifier: v, challenge: c, approvedBy: map[string]bool{}}
}

// authorizeURL is the authorization request (state s1), changed by mod.
func (c oauthClient) authorizeURL(mod func(url.Values)) string {
	q := url.Values{"response_type": {"code"}, "client_id": {c.id}, "redirect_uri": {c.redirect}, "state": {"s1"},
		"code_challenge": {c.challenge}, "code_challenge_method": {"S256"}, "resource": {c.resource}}
	if mod != nil {
		mod(q)
	}
	return c.issuer + "/oauth/authorize?" + q.Encode()
}

// tokenForm is the token request for code, changed by mod.
func (c oauthClient) tokenForm(code string, mod func(url.Values)) url.Values {
	f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {c.redirect}, "client_id": {c.id}, "code_verifier": {c.verifier}}
	if mod != nil {
		mod(f)
	}
	return f
}

// code logs user in through people's Chromium and returns the code the redirect URI
// got (delivered: listenRedirect's), after checking the authorization response.
func (c oauthClient) code(t *testing.T, people *jupytertest.Client, user string, delivered <-chan url.Values) string {
	t.Helper()
	l := logIn(t, people, c.authorizeURL(nil), user, c.redirect)
	back := testenv.Receive(t, testenv.Wait, "the authorization response at the redirect URI", delivered)
	// The Hub shows its authorization page only until the user has approved the
	// service once; the sidecar its consent page until the user has approved the client.
	consent := map[bool]string{false: " consent]", true: "]"}[c.approvedBy[user]]
	if (fmt.Sprint(l.Seen) != "[login"+consent && fmt.Sprint(l.Seen) != "[login authorize"+consent) || !strings.HasPrefix(l.URL, c.redirect+"?") ||
		back.Get("state") != "s1" || back.Get("code") == "" || back.Get("iss") != c.issuer {
		t.Fatalf("back from the login: %+v, the redirect URI got %v", l, back)
	}
	c.approvedBy[user] = true
	return back.Get("code")
}

// fetchRequest is one fetch of a page's script (hublogin.mjs's "fetch").
type fetchRequest struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
}

// fetchAnswer is what the page could read of the answer, or the browser's error.
type fetchAnswer struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Error   string            `json:"error"`
}

// fetchFrom runs requests in people's Chromium from a page at pageURL, one after the
// other.
func fetchFrom(t *testing.T, people *jupytertest.Client, pageURL string, requests ...fetchRequest) []fetchAnswer {
	t.Helper()
	b, _ := json.Marshal(people.Do(map[string]any{"op": "fetch", "page": pageURL, "requests": requests})["answers"])
	var out []fetchAnswer
	if err := json.Unmarshal(b, &out); err != nil || len(out) != len(requests) {
		t.Fatalf("fetch answers %s: %v", b, err)
	}
	return out
}

// startHubAuth starts a Hub running the servers of users and a hub-mode sidecar behind
// it with hub.oauth on.
func startHubAuth(t *testing.T, users ...string) (*jhubtest.Hub, map[string]*hubUser, *sidecartest.Sidecar) {
	t.Helper()
	root := t.TempDir()
	port := testenv.FreePort(t)
	hub := jhubtest.StartWith(t, jhubtest.Options{ServiceURL: fmt.Sprintf("http://127.0.0.1:%d", port), Homes: filepath.Join(root, "home")})
	spawned := spawnUsers(t, hub, users...)
	cfg := hubConfigFiles(hub.APIURL, root, jhubtest.StoreFile, jhubtest.FileIDFile, "token_cache_ttl: 1s",
		fmt.Sprintf("api_token: %q", hub.ServiceToken), fmt.Sprintf("oauth: {enabled: true, public_url: %q, trusted_proxies: [127.0.0.1/32]}", hub.ProxyURL)) +
		"notifications: {debounce: 250ms, max_delay: 2s}\n"
	return hub, spawned, sidecartest.LaunchOn(t, root, port, cfg, "serve")
}

// TestHubLogin runs the MCP authorization flow with the Hub as the login against a real
// JupyterHub and real users' servers, people logging in at the Hub in headless Chromium:
// a request without a token gets 401 naming the protected-resource metadata, which
// names the sidecar's authorization server; the official TypeScript SDK's OAuth client
// registers, its redirect handler opens the authorization URL in Chromium, where the
// user fills the Hub's own login form and approves on its authorization page, and the
// browser's redirect to the client's loopback listener delivers the code; the client
// exchanges it, lists only its user's notebooks and hears its user's edits made through
// the user's server, and nothing of the other user's. A client in a web page of an
// allowed origin does the same through CORS; a page of another origin cannot read the
// endpoint. Tampered redirect URIs, missing state or PKCE, a missing or wrong verifier,
// another client's code and a reused code are refused (the reused code ending its
// token), and a Hub user without the service's scope gets no code; the token is its
// user's only; revoked at the Hub, it is refused within hub.token_cache_ttl.
func TestHubLogin(t *testing.T) {
	people := browser.HubLogin(t)
	// A web page's origin allowed to use the MCP endpoint (the MCP Inspector's).
	page, pageDelivered := listenRedirect(t)
	origin := strings.TrimSuffix(page, "/cb")
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_ALLOWED_ORIGINS", origin)
	hub, users, sc := startHubAuth(t, "alice", "bob")
	r := &loginRig{people: people, hub: hub, sc: sc, alice: users["alice"], bob: users["bob"],
		endpoint: hub.ServicePrefix() + "mcp", issuer: strings.TrimRight(hub.ServicePrefix(), "/"),
		origin: origin, page: page, pageDelivered: pageDelivered}

	t.Run("discovery from the 401", r.discovery)
	t.Run("the official SDK logs in as each user", r.sdkLogsIn)
	t.Run("a client in a web page", r.webPage)
	t.Run("a confused deputy", r.confusedDeputy)
	t.Run("a registration flood", r.registrationFlood)
	t.Run("refusals", r.refusals)
}

// loginRig is TestHubLogin's stack: the Hub, its users alice and bob, the sidecar, the
// people in Chromium, and the page of an allowed origin.
type loginRig struct {
	people           *jupytertest.Client
	hub              *jhubtest.Hub
	sc               *sidecartest.Sidecar
	alice, bob       *hubUser
	endpoint, issuer string
	origin, page     string
	pageDelivered    <-chan url.Values
}

// discovery: the 401 of a request without a token, or with a wrong one, names the
// protected-resource metadata, which names the sidecar's authorization server.
func (r *loginRig) discovery(t *testing.T) {
	resp, err := http.Get(r.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := fmt.Sprintf(`resource_metadata=%q`, r.issuer+"/.well-known/oauth-protected-resource")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), want) {
		t.Fatalf("no token: %d %q, want 401 with %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
	}
	// A client holding a stale or wrong token is pointed to the metadata too.
	req, _ := http.NewRequest(http.MethodGet, r.endpoint, nil)
	req.Header.Set("Authorization", "Bearer not-a-token-the-hub-knows")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(got, want) || !strings.Contains(got, `error="invalid_token"`) {
		t.Fatalf("wrong token: %d %q, want 401 invalid_token with %s", resp.StatusCode, got, want)
	}
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	getJSON(t, r.issuer+"/.well-known/oauth-protected-resource", &prm)
	if prm.Resource != r.endpoint || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != r.issuer {
		t.Fatalf("protected-resource metadata: %+v", prm)
	}
	for _, p := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		var asm map[string]any
		getJSON(t, r.issuer+p, &asm)
		if asm["issuer"] != r.issuer || fmt.Sprint(asm["code_challenge_methods_supported"]) != "[S256]" || asm["registration_endpoint"] != r.issuer+"/oauth/register" {
			t.Fatalf("%s: %v", p, asm)
		}
	}
}

// sdkLogsIn: the official SDK's OAuth client logs in as each user, lists only their
// notebook and hears their edits, and nothing of the other's.
func (r *loginRig) sdkLogsIn(t *testing.T) {
	clients := map[string]*sidecartest.TSClient{}
	for _, u := range []*hubUser{r.alice, r.bob} {
		clients[u.name] = r.sdkClient(t, u)
	}
	for _, c := range clients {
		sidecartest.Drain(c, 700*time.Millisecond)
	}
	for _, tt := range []struct{ who, other *hubUser }{{r.alice, r.bob}, {r.bob, r.alice}} {
		want := editReal(t, tt.who)
		sidecartest.Await(t, clients[tt.who.name], testenv.Wait, sidecartest.NbURI)
		if n := sidecartest.Drain(clients[tt.other.name], time.Second); n != 0 {
			t.Fatalf("%s's client heard %d notifications of %s's edit", tt.other.name, n, tt.who.name)
		}
		sameNotebook(t, clients[tt.who.name], sidecartest.NbURI, want)
	}
}

// sdkClient is the official SDK's OAuth client logged in as u, which lists u's notebook
// only and reads it as u's server holds it.
func (r *loginRig) sdkClient(t *testing.T, u *hubUser) *sidecartest.TSClient {
	c := sidecartest.StartOAuthTS(t, r.endpoint, u.name)
	var list struct{ Resources []struct{ URI, Name string } }
	if err := json.Unmarshal(c.Do(map[string]any{"op": "list"}), &list); err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, res := range list.Resources {
		if strings.HasPrefix(res.URI, "notebook://") {
			uris = append(uris, res.URI)
		}
	}
	if fmt.Sprint(uris) != "["+sidecartest.NbURI+"]" {
		t.Fatalf("%s's resources/list: %v, want only their notebook", u.name, uris)
	}
	sameNotebook(t, c, sidecartest.NbURI, u.py.Notebook("a", sidecartest.NbPath))
	return c
}

// webPage: what a client running in a page of another origin (the MCP Inspector)
// fetches, in Chromium, which enforces CORS: the 401's challenge, both metadata
// documents, the registration, then, after alice's login, the token and MCP with it; a
// page of an origin not allowed may not read the endpoint's answers.
func (r *loginRig) webPage(t *testing.T) {
	const version = "2025-11-25"
	initialize := fetchRequest{URL: r.endpoint, Method: http.MethodPost, Body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`,
		Headers: map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": version}}
	clientID := r.pageRegisters(t, initialize, version)
	oc := newOAuthClient(t, r.issuer, r.endpoint, clientID, r.page)
	code := oc.code(t, r.people, "alice", r.pageDelivered)
	b := fetchFrom(t, r.people, r.origin+"/", fetchRequest{URL: r.issuer + "/oauth/token", Method: http.MethodPost,
		Headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, Body: oc.tokenForm(code, nil).Encode()})
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if b[0].Status != http.StatusOK || json.Unmarshal([]byte(b[0].Body), &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("the page's token request: %+v", b[0])
	}
	initialize.Headers["Authorization"] = "Bearer " + tok.AccessToken
	if c := fetchFrom(t, r.people, r.origin+"/", initialize)[0]; c.Status != http.StatusOK || c.Headers["mcp-session-id"] == "" {
		t.Fatalf("the page's initialize with alice's token: %+v", c)
	}
	other, _ := listenRedirect(t)
	if c := fetchFrom(t, r.people, strings.TrimSuffix(other, "cb"), initialize)[0]; c.Error == "" {
		t.Fatalf("a page of an origin not in server.allowed_origins read the endpoint: %+v", c)
	}
}

// pageRegisters is the page's discovery (initialize without a token, then both
// metadata documents) and registration; it returns the client id.
func (r *loginRig) pageRegisters(t *testing.T, initialize fetchRequest, version string) string {
	meta := map[string]string{"MCP-Protocol-Version": version} // the SDK's discovery sends it: a preflight
	a := fetchFrom(t, r.people, r.origin+"/", initialize,
		fetchRequest{URL: r.issuer + "/.well-known/oauth-protected-resource", Headers: meta},
		fetchRequest{URL: r.issuer + "/.well-known/oauth-authorization-server", Headers: meta},
		fetchRequest{URL: r.issuer + "/oauth/register", Method: http.MethodPost, Headers: map[string]string{"Content-Type": "application/json"},
			Body: `{"client_name":"page","redirect_uris":["` + r.page + `"],"token_endpoint_auth_method":"none"}`})
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if a[0].Status != http.StatusUnauthorized || !strings.Contains(a[0].Headers["www-authenticate"], `resource_metadata="`+r.issuer+`/.well-known/oauth-protected-resource"`) ||
		a[1].Status != http.StatusOK || a[2].Status != http.StatusOK || a[3].Status != http.StatusCreated || json.Unmarshal([]byte(a[3].Body), &reg) != nil {
		t.Fatalf("the page's discovery and registration: %+v", a)
	}
	return reg.ClientID
}

// deputy is a confused-deputy attempt: alice's own client, and another registered with
// a redirect URI of its choosing (a loopback listener standing in for
// https://evil.example/steal, recording every hit).
type deputy struct {
	own, evil                   string
	ownDelivered, evilDelivered <-chan url.Values
	ownID, evilID               string
	ownC, evilC                 oauthClient
}

// evilName is the other client's name: markup, to be shown as text.
const evilName = `Notebook helper <img src=x onerror="document.title='pwned'">`

// inHerBrowser are logIn's options for alice's browser answering the consent page so.
func inHerBrowser(consent string) map[string]any {
	return map[string]any{"session": "alice", "consent": consent}
}

// confusedDeputy: a link the other client made, opened in alice's browser, ends at the
// consent page naming that client and reaches it only if she approves; her approvals
// page lists and revokes her client's approval.
func (r *loginRig) confusedDeputy(t *testing.T) {
	d := &deputy{}
	d.own, d.ownDelivered = listenRedirect(t)
	d.evil, d.evilDelivered = listenRedirect(t)
	var ownReg, evilReg struct {
		ClientID string `json:"client_id"`
	}
	postJSON(t, r.issuer+"/oauth/register", map[string]any{"client_name": "alice's client", "redirect_uris": []string{d.own}}, http.StatusCreated, &ownReg)
	postJSON(t, r.issuer+"/oauth/register", map[string]any{"client_name": evilName, "redirect_uris": []string{d.evil}}, http.StatusCreated, &evilReg)
	d.ownID, d.evilID = ownReg.ClientID, evilReg.ClientID
	d.ownC = newOAuthClient(t, r.issuer, r.endpoint, d.ownID, d.own)
	d.evilC = newOAuthClient(t, r.issuer, r.endpoint, d.evilID, d.evil)

	r.ownLogins(t, d)
	r.evilLinkStopsAtConsent(t, d)
	r.approvalsRevoked(t, d)
}

// ownLogins: alice logs in from her own client, approving it on the consent page (and
// the service on the Hub's page, if this runs first); her browser keeps her Hub login.
// Again: remembered, no page at all.
func (r *loginRig) ownLogins(t *testing.T, d *deputy) {
	for i, want := range [][]string{{"[login consent]", "[login authorize consent]"}, {"[]"}} {
		l := logIn(t, r.people, d.ownC.authorizeURL(nil), "alice", d.own, inHerBrowser("approve"))
		back := testenv.Receive(t, testenv.Wait, "alice's code at her own client", d.ownDelivered)
		if !slices.Contains(want, fmt.Sprint(l.Seen)) || back.Get("code") == "" || back.Get("state") != "s1" {
			t.Fatalf("alice's login %d from her own client: %+v, got %v; want %s and a code", i, l, back, want)
		}
	}
}

// evilLinkStopsAtConsent: the attack, a link made by the other client opened in alice's
// browser, ends at the consent page naming that client (as text) and where it would
// send her; nothing reaches the client. Declining sends it access_denied and no code.
func (r *loginRig) evilLinkStopsAtConsent(t *testing.T, d *deputy) {
	l := logIn(t, r.people, d.evilC.authorizeURL(nil), "alice", d.evil, inHerBrowser("none"))
	evilHost := strings.TrimPrefix(strings.TrimSuffix(d.evil, "/cb"), "http://")
	if fmt.Sprint(l.Seen) != "[consent]" || !strings.HasPrefix(l.URL, r.issuer+"/oauth_callback?") || l.Status != http.StatusOK ||
		!strings.Contains(l.Text, evilName) || !strings.Contains(l.Text, evilHost) || !strings.Contains(l.Text, "alice") {
		t.Fatalf("the other client's link in alice's browser: %+v; want the consent page naming %q and %s", l, evilName, evilHost)
	}
	// The page was loaded after every redirect of the login: a hit would be in.
	if len(d.evilDelivered) != 0 {
		t.Fatalf("the other client's redirect URI was hit: %v", <-d.evilDelivered)
	}
	l = logIn(t, r.people, d.evilC.authorizeURL(nil), "alice", d.evil, inHerBrowser("deny"))
	back := testenv.Receive(t, testenv.Wait, "the other client's authorization response", d.evilDelivered)
	if fmt.Sprint(l.Seen) != "[consent]" || back.Get("error") != "access_denied" || back.Get("code") != "" || back.Get("state") != "s1" {
		t.Fatalf("alice declining: %+v, the client got %v; want access_denied and no code", l, back)
	}
}

// approvalsRevoked: alice lists her approvals on the approvals page, signed in with
// the Hub in her browser, and revokes her client's there: its next login asks again.
func (r *loginRig) approvalsRevoked(t *testing.T, d *deputy) {
	consents := r.issuer + "/oauth/consents"
	l := logIn(t, r.people, consents, "alice", consents, inHerBrowser(""))
	if !strings.Contains(l.Text, d.ownID) || strings.Contains(l.Text, d.evilID) {
		t.Fatalf("alice's approvals: %+v; want her client's only", l)
	}
	revoke := inHerBrowser("")
	revoke["click"] = `form:has(input[name=client_id][value="` + d.ownID + `"]) button`
	if l = logIn(t, r.people, consents, "alice", consents, revoke); l.Status != http.StatusOK || strings.Contains(l.Text, d.ownID) {
		t.Fatalf("alice revoking her client: %+v", l)
	}
	if l := logIn(t, r.people, d.ownC.authorizeURL(nil), "alice", d.own, inHerBrowser("none")); fmt.Sprint(l.Seen) != "[consent]" || len(d.ownDelivered) != 0 {
		t.Fatalf("alice's client after she revoked it: %+v; want the consent page again", l)
	}
}

// noFollow is an HTTP client that returns a redirect instead of following it.
var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// registrationFlood: one client at 127.0.0.2 registers through the Hub's proxy until
// refused; registrations and logins from elsewhere go on.
func (r *loginRig) registrationFlood(t *testing.T) {
	flooder := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	register := func(c *http.Client) int {
		resp, err := c.Post(r.issuer+"/oauth/register", "application/json", strings.NewReader(`{"redirect_uris":["http://127.0.0.1:9/cb"]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	n := 1
	for register(flooder) != http.StatusTooManyRequests {
		if n++; n == 1000 {
			break
		}
	}
	if n == 1000 {
		t.Fatal("1000 registrations from one source, none refused")
	}
	if status := register(http.DefaultClient); status != http.StatusCreated {
		t.Fatalf("a registration from another source after %d from the flooding one: %d", n, status)
	}
	redirect, _ := listenRedirect(t)
	var reg struct {
		ClientID string `json:"client_id"`
	}
	postJSON(t, r.issuer+"/oauth/register", map[string]any{"redirect_uris": []string{redirect}}, http.StatusCreated, &reg)
	resp, err := noFollow.Get(newOAuthClient(t, r.issuer, r.endpoint, reg.ClientID, redirect).authorizeURL(nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), r.hub.ProxyURL+"/hub/api/oauth2/authorize?") {
		t.Fatalf("a login from another source during the flood: %d %q, want the Hub's authorize", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// refusing is the refusals' client: registered with one loopback redirect URI, whose
// authorization responses arrive on delivered.
type refusing struct {
	redirect  string
	delivered <-chan url.Values
	oc        oauthClient
}

// refusals: bad registrations, authorization requests and token requests are refused;
// a reused code ends its token; the token is alice's only, is refused once revoked at
// the Hub, and never logged.
func (r *loginRig) refusals(t *testing.T) {
	f := &refusing{}
	f.redirect, f.delivered = listenRedirect(t)
	var reg struct {
		ClientID string `json:"client_id"`
	}
	postJSON(t, r.issuer+"/oauth/register", map[string]any{"redirect_uris": []string{f.redirect}, "token_endpoint_auth_method": "none"}, http.StatusCreated, &reg)
	for _, bad := range []string{"http://evil.example/cb", "javascript:alert(1)", "https://x.example/cb#frag"} {
		postJSON(t, r.issuer+"/oauth/register", map[string]any{"redirect_uris": []string{bad}}, http.StatusBadRequest, nil)
	}
	f.oc = newOAuthClient(t, r.issuer, r.endpoint, reg.ClientID, f.redirect)
	r.badAuthorizations(t, f)
	// carol logs in at the Hub but may not use the service: no code for her.
	if l := logIn(t, r.people, f.oc.authorizeURL(nil), jhubtest.NoAccessUser, f.redirect); l.Status != http.StatusForbidden || len(f.delivered) != 0 {
		t.Errorf("%s's login: %+v, %d authorization responses; want the Hub's 403 and none", jhubtest.NoAccessUser, l, len(f.delivered))
	}
	r.badTokenRequests(t, f)
	c, tok := r.reusedCodeEndsItsToken(t, f)
	r.tokenIsAlicesOnly(t, tok)
	r.revokedAtTheHub(t, tok)
	r.noSecretInTheLog(t, tok, c)
}

// badAuthorizations: tampered redirect URIs, an unknown client, no or plain PKCE, no
// state and another resource are refused, to the client when its redirect URI is known.
func (r *loginRig) badAuthorizations(t *testing.T, f *refusing) {
	for name, tt := range map[string]struct {
		mod    func(url.Values)
		status int
		error  string // in the redirect to the client
	}{
		"tampered redirect_uri": {func(q url.Values) { q.Set("redirect_uri", f.redirect+"/x") }, http.StatusBadRequest, ""},
		"another host":          {func(q url.Values) { q.Set("redirect_uri", "http://evil.example/cb") }, http.StatusBadRequest, ""},
		"unknown client":        {func(q url.Values) { q.Set("client_id", "nobody") }, http.StatusBadRequest, ""},
		"no PKCE":               {func(q url.Values) { q.Del("code_challenge") }, http.StatusFound, "invalid_request"},
		"PKCE plain":            {func(q url.Values) { q.Set("code_challenge_method", "plain") }, http.StatusFound, "invalid_request"},
		"no state":              {func(q url.Values) { q.Del("state") }, http.StatusFound, "invalid_request"},
		"another resource":      {func(q url.Values) { q.Set("resource", "http://evil.example/mcp") }, http.StatusFound, "invalid_target"},
	} {
		resp, err := noFollow.Get(f.oc.authorizeURL(tt.mod))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != tt.status || (tt.error == "" && loc != "") || (tt.error != "" && (!strings.HasPrefix(loc, f.redirect+"?") || !strings.Contains(loc, "error="+tt.error))) {
			t.Errorf("%s: %d Location %q, want %d %s", name, resp.StatusCode, loc, tt.status, tt.error)
		}
	}
}

// code is a code for alice, delivered to the refusals' client.
func (r *loginRig) code(t *testing.T, f *refusing) string {
	return f.oc.code(t, r.people, "alice", f.delivered)
}

// tokenRequest posts form to the token endpoint: the status and the answer.
func (r *loginRig) tokenRequest(t *testing.T, form url.Values) (int, map[string]any) {
	resp, err := http.PostForm(r.issuer+"/oauth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// badTokenRequests: a code is redeemed by its client, with its redirect URI and
// verifier only, and a failed request ends it.
func (r *loginRig) badTokenRequests(t *testing.T, f *refusing) {
	verifier := f.oc.verifier
	for name, mod := range map[string]func(url.Values){
		"no verifier":           func(v url.Values) { v.Del("code_verifier") },
		"wrong verifier":        func(v url.Values) { v.Set("code_verifier", verifier[:len(verifier)-1]+"x") },
		"tampered redirect_uri": func(v url.Values) { v.Set("redirect_uri", f.redirect+"/x") },
		"another client":        func(v url.Values) { v.Set("client_id", "nobody") },
	} {
		c := r.code(t, f)
		if status, out := r.tokenRequest(t, f.oc.tokenForm(c, mod)); status != http.StatusBadRequest || out["access_token"] != nil {
			t.Errorf("token request with %s: %d %v", name, status, out["error"])
		}
		if status, out := r.tokenRequest(t, f.oc.tokenForm(c, nil)); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Errorf("the code after a failed request (%s): %d %v, want it gone", name, status, out["error"])
		}
	}
}

// redeem is a new code for alice and the access token it is exchanged for.
func (r *loginRig) redeem(t *testing.T, f *refusing) (code, tok string) {
	code = r.code(t, f)
	status, out := r.tokenRequest(t, f.oc.tokenForm(code, nil))
	tok, _ = out["access_token"].(string)
	if status != http.StatusOK || tok == "" || out["token_type"] != "Bearer" {
		t.Fatalf("token request: %d %v", status, out["error"])
	}
	return code, tok
}

// ping is a ping with tok: the answer's status.
func (r *loginRig) ping(t *testing.T, tok string) int {
	status, _ := sidecartest.RPCStatusAs(t, r.endpoint, "", "Bearer "+tok, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
	return status
}

// reusedCodeEndsItsToken: a reused code is refused, and ends the token its first use
// gave. It returns a fresh code's and token's.
func (r *loginRig) reusedCodeEndsItsToken(t *testing.T, f *refusing) (code, tok string) {
	c, tok := r.redeem(t, f)
	if status, out := r.tokenRequest(t, f.oc.tokenForm(c, nil)); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("reused code: %d %v, want invalid_grant", status, out["error"])
	}
	if status := r.ping(t, tok); status != http.StatusUnauthorized {
		t.Errorf("the token of a reused code: %d, want 401", status)
	}
	return r.redeem(t, f)
}

// tokenIsAlicesOnly: the token reads alice's notebook, not bob's.
func (r *loginRig) tokenIsAlicesOnly(t *testing.T, tok string) {
	g, err := sidecartest.DialGoAs(t, r.endpoint, true, "Bearer "+tok)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.Bind(sidecartest.NbName, sidecartest.NbPath)
	sameNotebook(t, g, sidecartest.NbURI, r.alice.py.Notebook("a", sidecartest.NbPath))
	ctx := sidecartest.WaitCtx(t, time.Minute)
	res, err := callToolAs(ctx, g, "use_notebook", map[string]any{"notebook_name": "bobs", "notebook_path": "../bob/" + sidecartest.NbPath})
	if err == nil && !strings.Contains(res, `"isError":true`) {
		t.Errorf("alice's OAuth token bound bob's notebook: %s", res)
	}
	if _, err := g.TryRead("notebook://bobs"); err == nil {
		t.Error("alice's OAuth token read bob's notebook")
	}
}

// revokedAtTheHub: revoked at the Hub, the token is refused within the token cache's
// TTL (1 s here); Hub API tokens keep working.
func (r *loginRig) revokedAtTheHub(t *testing.T, tok string) {
	revokeOAuthTokens(t, r.hub, "alice")
	testenv.Eventually(t, testenv.Wait, "alice's revoked OAuth token refused", func() bool { return r.ping(t, tok) == http.StatusUnauthorized })
	if _, err := sidecartest.DialGoAs(t, r.endpoint, true, "token "+r.bob.tok.Value); err != nil {
		t.Errorf("bob's Hub API token: %v", err)
	}
}

// noSecretInTheLog: no token or code in the sidecar's log.
func (r *loginRig) noSecretInTheLog(t *testing.T, tok, code string) {
	logs := r.sc.Logs.String()
	for what, secret := range map[string]string{"the access token": tok, "a code": code, "the service's token": r.hub.ServiceToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("the sidecar's log holds %s", what)
		}
	}
}

// pkcePair is an RFC 7636 verifier and its S256 challenge.
func pkcePair(t *testing.T) (string, string) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	v := base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(v))
	return v, base64.RawURLEncoding.EncodeToString(sum[:])
}

// revokeOAuthTokens deletes user's tokens that a service's OAuth client got, through
// the Hub's API with the service's token (the Hub may revoke a client's other tokens of
// the user with one: the list is read again after each).
func revokeOAuthTokens(t *testing.T, hub *jhubtest.Hub, user string) {
	t.Helper()
	for n := 0; ; n++ {
		var list struct {
			APITokens []struct {
				ID          string `json:"id"`
				OAuthClient string `json:"oauth_client"`
			} `json:"api_tokens"`
		}
		hubAPI(t, hub, http.MethodGet, "/users/"+user+"/tokens", http.StatusOK, &list)
		id := ""
		for _, tok := range list.APITokens {
			if tok.OAuthClient != "" && tok.OAuthClient != "JupyterHub" {
				id = tok.ID
			}
		}
		switch {
		case id != "":
			hubAPI(t, hub, http.MethodDelete, "/users/"+user+"/tokens/"+id, http.StatusNoContent, nil)
		case n == 0:
			t.Fatalf("%s has no OAuth token of a service: %+v", user, list)
		default:
			return
		}
	}
}

func hubAPI(t *testing.T, hub *jhubtest.Hub, method, path string, want int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, hub.APIURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+hub.ServiceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
}

func getJSON(t *testing.T, u string, out any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

func postJSON(t *testing.T, u string, body any, want int, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(u, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("POST %s %s: %d, want %d", u, b, resp.StatusCode, want)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}
