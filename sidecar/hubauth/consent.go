package hubauth

import (
	"crypto/subtle"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// The consent step. The Hub tells who the user is only once they have logged in, so
// the sidecar asks after the Hub's callback: a client the user has not approved gets
// the sidecar's own page (the client's name, where it sends the user back, what it
// may do) and no code until the user approves there. The page's form is bound to the
// browser that loaded it (a cookie, SameSite=Strict, HttpOnly) and to the pending
// authorization (a token in the form), both compared in constant time; it is POST
// only, single-use, refused from another origin, and, from a browser that sends
// Sec-Fetch-* headers, taken only from a click on the page itself (userNavigation);
// the page is shown only to the browser's window (topLevel), so a script of another
// page of the origin cannot read its form. An approval is remembered for the user, the
// client and the redirect URI (approvals.go; in memory: a restart asks again, as
// clients register again anyway) until the user revokes it at oauth/consents
// (manage.go).

// consentCookie holds the browser's secret the consent forms are bound to.
const consentCookie = "jupyter-mcp-sidecar-consent"

// consent is an authorization waiting for the user's decision: the flow, the user and
// the Hub's token, handed to the client only on approval.
type consent struct {
	flow
	user      string
	token     string
	expiresIn int
	csrf      string // the form's token
	browser   string // hash of the browser's cookie
}

// maxPendingPerUser bounds the consent pages one user has waiting, so that no user's
// fill the bound of all users' (MaxPending).
const maxPendingPerUser = 20

// pendingOf is the number of consent pages user has waiting.
func (s *Server) pendingOf(user string) int {
	n := 0
	s.pending.each("", func(c consent) {
		if c.user == user {
			n++
		}
	})
	return n
}

// consentOrCode ends the Hub's callback for user: a code for a client the user has
// approved for f's redirect URI, else the consent page.
func (s *Server) consentOrCode(w http.ResponseWriter, r *http.Request, f flow, user, tok string, expiresIn int) {
	if s.approved(user, f.clientID, f.redirectURI) {
		s.issue(w, r, f, user, tok, expiresIn)
		return
	}
	c, ok := s.client(f.clientID)
	if !ok {
		http.Error(w, "the client is no longer registered: start again from your MCP client", http.StatusBadRequest)
		return
	}
	var secret string
	if ck, err := r.Cookie(consentCookie); err == nil && len(ck.Value) == randomLen {
		secret = ck.Value // the browser's other consent pages stay valid
	} else {
		secret = random()
		http.SetCookie(w, &http.Cookie{Name: consentCookie, Value: secret, Path: s.base + "/", HttpOnly: true,
			Secure: s.secure, SameSite: http.SameSiteStrictMode})
	}
	id, csrf := random(), random()
	if s.pendingOf(user) >= maxPendingPerUser || !s.pending.put(id, consent{flow: f, user: user, token: tok, expiresIn: expiresIn, csrf: csrf, browser: hash(secret)}, s.cfg.FlowTTL) {
		s.redirectError(w, r, f.redirectURI, f.state, "temporarily_unavailable", "too many logins in progress")
		return
	}
	// A user's login is at the client's consent page: the client waits for her decision
	// as long as the page may (FlowTTL), past RegistrationLoginWindow if need be, and no
	// longer: a user's logins in progress are bounded, so she cannot keep the waiting
	// clients full with logins she denies or abandons (she kept them for 24 hours: red team
	// of issue 39, pass 12, M3).
	s.clients.extend(f.clientID, s.cfg.FlowTTL)
	nonce := s.pageHeaders(w, formTarget(f.redirectURI))
	name := c.name
	if name == "" {
		name = "(no name given)"
	}
	err := consentPage.Execute(w, map[string]string{
		"Nonce": nonce, "Action": s.base + "/oauth/consent", "ID": id, "CSRF": csrf, "ClientID": f.clientID,
		"Name": name, "Registered": registeredText(c.registered, s.now()), "User": user, "Back": redirectShown(f.redirectURI), "Consents": s.cfg.Issuer + "/oauth/consents",
	})
	if err != nil {
		s.log.Warn("consent page", "err", err)
	}
}

// pageHeaders sets the headers of the sidecar's pages, whose forms post to the issuer's
// origin and extra (a CSP source list, "" or starting with a space), and returns the
// nonce of the page's style.
func (s *Server) pageHeaders(w http.ResponseWriter, extra string) string {
	nonce := random()
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+nonce+"'; script-src 'nonce-"+nonce+"'; form-action 'self'"+extra+
		"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	// A window of another page of the Hub's origin (a Hub without subdomains serves its
	// users' pages there) that opened this one loses its hold on it: the browser puts the
	// page in a group of its own. It read the consent page's form and rewrote the page
	// around a real click (red team of issue 39, pass 11, H1).
	if !s.cfg.AllowOpener {
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
	}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make the form's Origin "null"
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/html; charset=utf-8")
	return nonce
}

// decide takes the consent page's form: approve or deny, for the pending
// authorization it names, from the browser that was shown it.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	if !s.sameOrigin(r) {
		http.Error(w, "the consent form comes from another site", http.StatusForbidden)
		return
	}
	if !userNavigation(r) {
		http.Error(w, "the consent form is taken only from a click on the consent page", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "a form body of at most 16 KiB", http.StatusBadRequest)
		return
	}
	form := r.PostForm
	p, ok := s.pending.take(form.Get("consent")) // single-use: gone whatever follows
	if !ok {
		http.Error(w, "unknown, used or expired consent: start again from your MCP client", http.StatusBadRequest)
		return
	}
	ck, err := r.Cookie(consentCookie)
	if err != nil || !equal(hash(ck.Value), p.browser) || !equal(form.Get("csrf"), p.csrf) {
		http.Error(w, "the consent form was not sent from the consent page this browser was shown", http.StatusForbidden)
		return
	}
	if form.Get("client_id") != p.clientID {
		http.Error(w, "the consent form names another client", http.StatusForbidden)
		return
	}
	switch form.Get("decision") {
	case "approve":
		c, ok := s.client(p.clientID)
		if !ok {
			http.Error(w, "the client is no longer registered: start again from your MCP client", http.StatusBadRequest)
			return
		}
		if !s.keep(p.clientID) {
			s.redirectError(w, r, p.redirectURI, p.state, "temporarily_unavailable", "too many clients approved")
			return
		}
		if !s.grant(p.user, approval{clientID: p.clientID, name: c.name, redirectURI: p.redirectURI, at: s.now()}) {
			s.redirectError(w, r, p.redirectURI, p.state, "temporarily_unavailable", "too many approvals remembered")
			return
		}
		s.log.Info("oauth client approved by a user")
		s.issue(w, r, p.flow, p.user, p.token, p.expiresIn)
	case "deny":
		s.redirectError(w, r, p.redirectURI, p.state, "access_denied", "the user denied the client access")
	default:
		http.Error(w, "decision must be approve or deny", http.StatusBadRequest)
	}
}

// sameOrigin refuses a request a browser says comes from another origin than the
// issuer's (Origin, Sec-Fetch-Site). A request with neither is no current browser's;
// it still needs the browser's cookie and the page's token.
func (s *Server) sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	origin := r.Header.Get("Origin")
	return origin == "" || origin == s.origin()
}

// userNavigation reports whether a form's POST is a person's click on a page of the
// issuer's origin, as far as the browser tells: with Sec-Fetch-* headers (every
// current browser's), a same-origin navigation of the window, activated by the user.
// A same-origin fetch() (mode cors) or a script's form.submit() (no Sec-Fetch-User)
// is none; a request without the headers is no current browser's, and still needs
// the form's cookie and token.
func userNavigation(r *http.Request) bool {
	h := r.Header
	if h.Get("Sec-Fetch-Site") == "" && h.Get("Sec-Fetch-Mode") == "" && h.Get("Sec-Fetch-Dest") == "" && h.Get("Sec-Fetch-User") == "" {
		return true
	}
	return h.Get("Sec-Fetch-Site") == "same-origin" && h.Get("Sec-Fetch-Mode") == "navigate" &&
		h.Get("Sec-Fetch-Dest") == "document" && h.Get("Sec-Fetch-User") == "?1"
}

// topLevel reports whether a request that answers with a page holding a form's token
// loads the browser's window, as far as the browser tells: a fetch() of another page
// of the origin (which could read the token) or a frame is refused.
func topLevel(r *http.Request) bool {
	mode, dest := r.Header.Get("Sec-Fetch-Mode"), r.Header.Get("Sec-Fetch-Dest")
	return (mode == "" || mode == "navigate") && (dest == "" || dest == "document")
}

// origin is the issuer's origin.
func (s *Server) origin() string {
	u, _ := url.Parse(s.cfg.Issuer) // checked by New
	return u.Scheme + "://" + u.Host
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// sourceExpr matches what a CSP source expression of a redirect URI may hold.
var sourceExpr = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:(//[A-Za-z0-9.:\[\]-]+)?$`)

// formTarget is the redirect URI's origin (or scheme) for the page's form-action: the
// form's answer redirects there, which Chromium checks against form-action.
func formTarget(redirectURI string) string {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return ""
	}
	src := strings.ToLower(u.Scheme) + ":"
	if (u.Scheme == "http" || u.Scheme == "https") && !strings.HasPrefix(u.Host, "[") {
		// A CSP host-source has no IPv6 literal (Chromium drops one, and then blocks the
		// redirect): an http one on [::1] is allowed by its scheme alone.
		src += "//" + u.Host
	}
	if !sourceExpr.MatchString(src) {
		return ""
	}
	return " " + src
}

// redirectShown is where the client sends the user back, as the page shows it: the
// whole URI, which the code goes to, but for http on a loopback IP literal, a program
// on this computer listening on a port of its choosing (shown as host and path).
func redirectShown(redirectURI string) string {
	u, err := url.Parse(redirectURI)
	if err != nil || !loopbackHTTP(u, redirectURI) {
		return redirectURI
	}
	return u.Host + u.EscapedPath() + " (a program on this computer)"
}

// armScript enables a page's buttons marked data-arm once the person is at the page: it
// is visible and focused, at least 300 × 200, every element marked data-shown in view
// (the consent page's heading and where it sends the user back), the pointer really moved or a key was pressed
// on it (not a held key's repeat), and 600 ms have passed; leaving it, or scrolling its
// text away, disarms them, and a submit they did not arm is stopped. A page elsewhere
// asked for a double-click and closed its window on the first press, so that the second
// landed on Approve, brought to the front beneath it (DoubleClickjacking: red team of
// issue 39, pass 12, D1); a popup of 240 × 90 opened at #consent showed only the buttons
// (pass 13, D4); a held key armed it (D5). The page loses any fragment and starts at its
// top. A button pressed from the keyboard must have held the focus for 600 ms itself.
const armScript = `(() => {
  if (location.hash) history.replaceState(null, '', location.pathname + location.search);
  scrollTo(0, 0);
  const buttons = [...document.querySelectorAll('[data-arm]')];
  const shown = [...document.querySelectorAll('[data-shown]')];
  const inView = (el) => { const r = el.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight && r.left >= 0 && r.right <= innerWidth; };
  const here = () => document.visibilityState === 'visible' && document.hasFocus() && innerWidth >= 300 && innerHeight >= 200 && shown.every(inView);
  let timer = 0, armed = false;
  const off = () => { armed = false; clearTimeout(timer); timer = 0; buttons.forEach((b) => { b.disabled = true; }); };
  const gesture = (e) => {
    if (e.type === 'pointermove' && !e.movementX && !e.movementY) return;
    if (e.type === 'keydown' && e.repeat) return;
    if (timer || armed || !here()) return;
    timer = setTimeout(() => { timer = 0; if (here()) { armed = true; buttons.forEach((b) => { b.disabled = false; }); } else off(); }, 600);
  };
  addEventListener('pointermove', gesture);
  addEventListener('keydown', gesture);
  addEventListener('blur', off);
  addEventListener('resize', () => { if (!here()) off(); });
  addEventListener('scroll', () => { if (!here()) off(); });
  document.addEventListener('visibilitychange', () => { if (document.visibilityState !== 'visible') off(); });
  document.addEventListener('submit', (e) => { if (e.submitter && e.submitter.hasAttribute('data-arm') && !(armed && here())) { e.preventDefault(); off(); } });
  // A button pressed from the keyboard (a click of detail 0: Enter or Space) must have
  // held the focus for 600 ms itself: keys typed into a form elsewhere, then Tabs and
  // Enter, approved (pass 14, K1).
  const focused = new Map();
  buttons.forEach((b) => {
    b.addEventListener('focus', () => focused.set(b, performance.now()));
    b.addEventListener('blur', () => focused.delete(b));
    b.addEventListener('click', (e) => {
      if (e.detail === 0 && !(focused.has(b) && performance.now() - focused.get(b) >= 600)) e.preventDefault();
    });
  });
})();`

var consentPage = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Allow access to your notebooks?</title>
<style nonce="{{.Nonce}}">body{font-family:system-ui,sans-serif;max-width:38em;margin:3em auto;padding:0 1em;line-height:1.45}
dt{font-weight:600;margin-top:.6em}code{word-break:break-all}bdi{display:inline-block;max-width:100%;overflow:hidden;overflow-wrap:anywhere;vertical-align:bottom}button{font-size:1em;padding:.4em 1.2em;margin-right:1em}</style>
</head><body><main>
<h1 data-shown>Allow <bdi dir="auto" id="client-name">{{.Name}}</bdi> to use your notebooks?</h1>
<p>You are logged in to JupyterHub as <b id="user">{{.User}}</b>. An MCP client asks to act as you.</p>
<dl>
<dt>Client</dt><dd><bdi dir="auto">{{.Name}}</bdi> <span id="name-warning">(the name is the client's own; it is not checked)</span>,
client ID <code>{{.ClientID}}</code>, <span id="registered">{{.Registered}}</span></dd>
<dt>Sends you back to</dt><dd id="redirect-host" data-shown><code>{{.Back}}</code></dd>
<dt>It will be able to</dt><dd>list and read all your notebooks, live, and be told when they change, as you, until its access expires.</dd>
</dl>
<p>Approve only if you started this login yourself, from an MCP client you use. If a link or a page you did not expect brought you here, deny.
Approving is remembered for this client and this address: its next logins back here come back without this page. Your
approvals are listed, and revoked, at <a href="{{.Consents}}">{{.Consents}}</a>.</p>
<form id="consent" method="post" action="{{.Action}}">
<input type="hidden" name="consent" value="{{.ID}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<input type="hidden" name="client_id" value="{{.ClientID}}">
<button type="submit" name="decision" value="deny">Deny</button>
<button type="submit" name="decision" value="approve" data-arm disabled>Approve</button>
</form>
<noscript><p>Approving needs JavaScript: it keeps the button from taking a click meant for another window.</p></noscript>
<script nonce="{{.Nonce}}">` + armScript + `</script></main></body></html>
`))
