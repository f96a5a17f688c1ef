package hub

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/browser"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// startHubOAuth starts a Hub and a hub-mode sidecar behind it with hub.oauth on and
// the oauth keys more ("registration: token"), without users' servers; alice's home
// exists, empty.
func startHubOAuth(t *testing.T, more ...string) (*jhubtest.Hub, *sidecartest.Sidecar) {
	t.Helper()
	root := t.TempDir()
	port := testenv.FreePort(t)
	hub := jhubtest.StartWith(t, jhubtest.Options{ServiceURL: fmt.Sprintf("http://127.0.0.1:%d", port), Homes: filepath.Join(root, "home")})
	if err := os.MkdirAll(filepath.Join(hub.Homes, "alice"), 0o755); err != nil {
		t.Fatal(err)
	}
	oauth := fmt.Sprintf("oauth:\n    enabled: true\n    public_url: %q\n", hub.ProxyURL)
	for _, m := range more {
		oauth += "    " + m + "\n"
	}
	cfg := hubConfigFiles(hub.APIURL, root, jhubtest.StoreFile, jhubtest.FileIDFile, fmt.Sprintf("api_token: %q", hub.ServiceToken), oauth)
	return hub, sidecartest.LaunchOn(t, root, port, cfg, "serve")
}

// fromAddr is an HTTP client whose connections come from the loopback address ip, as
// any local user of the Hub's host may choose (127.0.0.0/8 is theirs to bind), never
// following redirects.
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// registration is a registration's answer.
type registration struct {
	status     int
	retryAfter string
	ClientID   string `json:"client_id"`
	ClientName string `json:"client_name"`
	Error      string `json:"error"`
	Desc       string `json:"error_description"`
}

// registerAt posts a registration of body to issuer with c, with the request's headers
// (name, value, …); a request that fails is the test's error and status 0.
func registerAt(t *testing.T, c *http.Client, issuer string, body any, header ...string) registration {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, issuer+"/oauth/register", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Error(err) // not Fatal: called from the flood's goroutines too
		return registration{}
	}
	defer resp.Body.Close()
	out := registration{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &out)
	return out
}

// authorizeStatus is the status of client id's authorization request with redirect,
// from c: 302 to the Hub while the client is known, 400 once it is not.
func authorizeStatus(t *testing.T, c *http.Client, issuer, resource, id, redirect string) int {
	t.Helper()
	resp, err := c.Get(newOAuthClient(t, issuer, resource, id, redirect).authorizeURL(nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestHubRegistration attacks, on the built binary behind a real JupyterHub with
// hub.oauth's defaults, what issue 39 found of the registration and the consent page:
// redirect URIs that hand the code to a browser, a client name that reorders the
// consent page (in Chromium), a flood of registrations from a local user of the Hub's
// host that forgets a client registered before, and the unauthenticated /readyz
// telling anyone how many users are active.
func TestHubRegistration(t *testing.T) {
	people := browser.HubLogin(t)
	hub, sc := startHubOAuth(t)
	issuer := strings.TrimRight(hub.ServicePrefix(), "/")
	endpoint := hub.ServicePrefix() + "mcp"
	direct := sc.URL + "/services/mcp" // the sidecar's own listener, as a local user reaches it

	t.Run("redirect schemes", func(t *testing.T) {
		c := fromAddr("127.0.0.11")
		// What the real clients register: accepted by default, but for Cursor's own
		// scheme, which the operator allows (hub.oauth.allowed_redirect_schemes).
		for client, uris := range map[string][]string{
			"VS Code":        {"http://127.0.0.1:33418/", "https://vscode.dev/redirect"},
			"Claude Code":    {"http://localhost:56648/callback"},
			"Claude":         {"https://claude.ai/api/mcp/auth_callback"},
			"MCP Inspector":  {"http://localhost:6274/oauth/callback", "http://localhost:6274/oauth/callback/debug"},
			"a native app":   {"com.example.notebooks:/oauth2redirect"},
			"Cursor, hosted": {"https://www.cursor.com/agents/mcp/oauth/callback", "http://localhost:8787/callback"},
		} {
			if r := registerAt(t, c, direct, map[string]any{"client_name": client, "redirect_uris": uris}); r.status != http.StatusCreated {
				t.Errorf("%s's redirect URIs %v: %d %s", client, uris, r.status, r.Desc)
			}
		}
		c = fromAddr("127.0.0.12")
		for _, uri := range []string{"microsoft-edge:https://evil.example/x", "googlechromes://evil.example/x", "x-safari-https://evil.example/x",
			"firefox://open-url?url=" + url.QueryEscape("https://evil.example/x"), "cursor://anysphere.cursor-mcp/oauth/callback"} {
			r := registerAt(t, c, direct, map[string]any{"client_name": "x", "redirect_uris": []string{"http://127.0.0.1:9/cb", uri}})
			if r.status != http.StatusBadRequest || r.Error != "invalid_redirect_uri" || !strings.Contains(r.Desc, "reverse-domain") || r.ClientID != "" {
				t.Errorf("%s: %d %s %q, want 400 invalid_redirect_uri with the reason", uri, r.status, r.Error, r.Desc)
			}
		}
	})

	t.Run("the client's name", func(t *testing.T) {
		// The name ends in U+202E (RIGHT-TO-LEFT OVERRIDE): shown raw, it would lay out
		// the rest of its line right to left, the page's warning that the name is not
		// checked among it. In Chromium: the warning and the title read left to right.
		// Before it, 90 stacked combining marks drew a column over the page's other lines
		// (red team pass 10, L3): 3 are kept, and the name's box clips what it draws.
		redirect, delivered := listenRedirect(t)
		r := registerAt(t, fromAddr("127.0.0.13"), direct, map[string]any{"client_name": "Visual Studio Code" + strings.Repeat("\u0301", 90) + "\u202e", "redirect_uris": []string{redirect}})
		if r.status != http.StatusCreated {
			t.Fatalf("registration: %d", r.status)
		}
		if r.ClientName != "Visual Studio Code\u0301\u0301\u0301" {
			t.Errorf("the registration's name %q: want it kept without U+202E, with 3 combining marks", r.ClientName)
		}
		const probe = `(() => {
  // ltr: whether the phrase s is laid out left to right: of each two letters next to
  // each other on one line (the phrase may wrap), the first is left of the second.
  const ltr = (s) => {
    const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n; (n = w.nextNode());) {
      const i = n.data.indexOf(s);
      if (i < 0) continue;
      const box = (k) => { const r = document.createRange(); r.setStart(n, k); r.setEnd(n, k + 1); return r.getBoundingClientRect(); };
      let pairs = 0;
      for (let k = i; k + 1 < i + s.length; k++) {
        const a = box(k), b = box(k + 1);
        if (a.width === 0 || b.width === 0 || Math.abs(a.top - b.top) >= 2) continue; // a space at a line's end, or a wrap
        if (a.left >= b.left) return false;
        pairs++;
      }
      return pairs > 0;
    }
    return null;
  };
  const clipped = [...document.querySelectorAll('bdi')].every((b) => getComputedStyle(b).overflow === 'hidden');
  // Approve takes no click until the person is at the page (the pointer has not moved
  // over it here): a double-click begun on another window cannot land on it.
  const armed = !document.querySelector('button[value=approve]').disabled;
  // Reached with #consent (a popup showing only the buttons, pass 13, D4): the page
  // drops the fragment and starts at its top.
  const top = location.hash === '' && scrollY === 0;
  return { warning: ltr('(the name is') && ltr('not checked)'), title: ltr('to use your'), clipped, armed, top };
})()`
		out := people.Do(map[string]any{"op": "login", "url": newOAuthClient(t, issuer, endpoint, r.ClientID, redirect).authorizeURL(nil) + "#consent",
			"user": "alice", "until": redirect, "consent": "none", "probe": probe})
		text, _ := out["text"].(string)
		laid, _ := out["probe"].(map[string]any)
		if fmt.Sprint(out["seen"]) != "[login authorize consent]" && fmt.Sprint(out["seen"]) != "[login consent]" {
			t.Fatalf("alice's login: %v, want the consent page", out)
		}
		if laid["warning"] != true || laid["title"] != true || laid["clipped"] != true || laid["armed"] != false || laid["top"] != true {
			t.Errorf("the consent page in Chromium: %v; want the warning and the title laid out left to right, the name clipped to its box, Approve not armed before the pointer moved:\n%s", laid, text)
		}
		if strings.ContainsRune(text, '\u202e') || !strings.Contains(text, "client ID "+r.ClientID) || !strings.Contains(text, "registered just now, ") &&
			!strings.Contains(text, "registered a minute ago, ") {
			t.Errorf("the consent page's text: %q; want no U+202E, the client ID and when it registered", text)
		}
		if len(delivered) != 0 {
			t.Errorf("the client's redirect URI was hit: %v", <-delivered)
		}
	})

	t.Run("readyz", func(t *testing.T) {
		// alice uses the service: one user active. /readyz and /healthz, which anyone
		// reaches through the Hub's proxy, say nothing of it; /metrics does.
		if _, err := sidecartest.DialGoAs(t, endpoint, true, "token "+hub.Token("alice").Value); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"readyz", "healthz"} {
			resp, err := http.Get(hub.ServicePrefix() + p)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := map[string]string{"readyz": "{\"ready\":true}\n", "healthz": "ok\n"}[p]; resp.StatusCode != http.StatusOK || string(b) != want {
				t.Errorf("unauthenticated /services/mcp/%s: %d %q, want %q", p, resp.StatusCode, b, want)
			}
		}
		if n := sc.Metric("jupyter_mcp_sidecar_hub_users_active"); n != 1 {
			t.Errorf("jupyter_mcp_sidecar_hub_users_active %v, want 1 (alice)", n)
		}
	})

	t.Run("a registration flood", func(t *testing.T) {
		// A client registered before the flood.
		early, _ := listenRedirect(t)
		r := registerAt(t, fromAddr("127.0.0.14"), direct, map[string]any{"client_name": "early", "redirect_uris": []string{early}})
		if r.status != http.StatusCreated {
			t.Fatalf("the early registration: %d", r.status)
		}
		checker := fromAddr("127.0.0.15")
		stillKnown := func(when string) {
			t.Helper()
			if s := authorizeStatus(t, checker, direct, endpoint, r.ClientID, early); s != http.StatusFound {
				t.Fatalf("the client registered before the flood, %s: authorize %d, want 302 to the Hub", when, s)
			}
		}
		// Issue 39's flood: 10,050 registrations from one direct connection, each with
		// an X-Forwarded-For of its own. The peer is no trusted proxy: all are its own,
		// beyond its burst refused.
		flooder := fromAddr("127.0.0.2")
		status := map[int]int{}
		start := time.Now()
		for i := range 10050 {
			f := registerAt(t, flooder, direct, map[string]any{"redirect_uris": []string{"http://127.0.0.1:9/cb"}},
				"X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255))
			status[f.status]++
		}
		// Its budget: a burst of 10, then 1 a second.
		if budget := 10 + int(time.Since(start).Seconds()) + 1; status[http.StatusCreated] > budget || status[http.StatusCreated]+status[http.StatusTooManyRequests] != 10050 {
			t.Errorf("10,050 registrations with forged X-Forwarded-For from one peer: %v; want its budget (%d) registered, the rest 429", status, budget)
		}
		stillKnown("after the forged X-Forwarded-For")

		// Then from 1,010 loopback addresses, 10 each (within each one's burst): the
		// global bound on clients waiting for an approval (10,000) refuses the rest,
		// 503 with Retry-After, and forgets nobody.
		var mu sync.Mutex
		status = map[int]int{}
		retry := ""
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < 1010; i += 4 {
					c := fromAddr(fmt.Sprintf("127.1.%d.%d", i/250, i%250+1))
					for range 10 {
						f := registerAt(t, c, direct, map[string]any{"redirect_uris": []string{"http://127.0.0.1:9/cb"}})
						mu.Lock()
						status[f.status]++
						if f.status == http.StatusServiceUnavailable && retry == "" {
							retry = f.retryAfter
						}
						mu.Unlock()
					}
					c.CloseIdleConnections()
				}
			})
		}
		wg.Wait()
		if s, err := strconv.Atoi(retry); err != nil || s < 1 || status[http.StatusServiceUnavailable] == 0 ||
			status[http.StatusCreated]+status[http.StatusServiceUnavailable] != 10100 {
			t.Errorf("10,100 registrations from 1,010 addresses: %v, Retry-After %q; want 201 to the global bound, then 503 with Retry-After", status, retry)
		}
		stillKnown("after the global bound was reached")
	})
}

// TestHubRegistrationPolicy runs the operator's registration keys on the built binary
// behind a real JupyterHub: registration token (RFC 7591 initial access token, from a
// file, never logged), a short scheme allowed (Cursor's), the Hub's proxy trusted for
// X-Forwarded-For, and a client the operator registered, with which alice logs in
// through Chromium.
func TestHubRegistrationPolicy(t *testing.T) {
	people := browser.HubLogin(t)
	const token = "initial-access-9f1c2b7d4e6a8053"
	tokenFile := filepath.Join(t.TempDir(), "registration-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	own, delivered := listenRedirect(t)
	hub, sc := startHubOAuth(t, "registration: token", fmt.Sprintf("registration_token_file: %q", tokenFile),
		"trusted_proxies: [127.0.0.1/32]", "allowed_redirect_schemes: [cursor]",
		fmt.Sprintf("clients: [{client_id: team-notebooks, client_name: Team notebooks, redirect_uris: [%q]}]", own))
	issuer := strings.TrimRight(hub.ServicePrefix(), "/")
	endpoint := hub.ServicePrefix() + "mcp"

	var meta map[string]any
	getJSON(t, issuer+"/.well-known/oauth-authorization-server", &meta)
	if meta["registration_endpoint"] != issuer+"/oauth/register" {
		t.Errorf("the metadata with registration token: %v", meta["registration_endpoint"])
	}
	// Cursor's registration, as it sends it: three redirect URIs, its own scheme among them.
	cursor := map[string]any{"client_name": "Cursor", "redirect_uris": []string{"cursor://anysphere.cursor-mcp/oauth/callback",
		"https://www.cursor.com/agents/mcp/oauth/callback", "http://localhost:8787/callback"}}
	c := fromAddr("127.0.0.21")
	for auth, want := range map[string]int{"": 401, "Bearer wrong": 401, "Bearer " + token[:len(token)-1]: 401, "token " + token: 401, "Bearer " + token: 201} {
		if r := registerAt(t, c, issuer, cursor, "Authorization", auth); r.status != want {
			t.Errorf("registration with Authorization %q: %d %s, want %d", auth, r.status, r.Desc, want)
		}
	}
	// The operator's client logs in as any other.
	oc := newOAuthClient(t, issuer, endpoint, "team-notebooks", own)
	code := oc.code(t, people, "alice", delivered)
	resp, err := http.PostForm(issuer+"/oauth/token", oc.tokenForm(code, nil))
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || tok.AccessToken == "" {
		t.Fatalf("the operator's client's token request: %d %v", resp.StatusCode, err)
	}
	if _, err := sidecartest.DialGoAs(t, endpoint, true, "Bearer "+tok.AccessToken); err != nil {
		t.Errorf("MCP with the operator's client's token: %v", err)
	}
	logs := sc.Logs.String()
	if strings.Contains(logs, token) {
		t.Error("the sidecar's log holds the initial access token")
	}
}
