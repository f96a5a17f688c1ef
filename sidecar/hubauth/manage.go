package hubauth

import (
	"html/template"
	"net/http"
	"net/url"
	"time"
)

// The approvals page. oauth/consents is a page for the user, signed in to the Hub in a
// browser: it lists the clients they approved, each with its redirect URI, and revokes
// one (which ends every token of theirs that client holds) with a button. No token is
// taken there, so a client holding one of the user's tokens can neither list nor
// revoke. A browser without the page's session cookie is sent through the Hub's login
// (the service's own OAuth client, as for the clients' logins, in a flow of its own
// kind); back at oauth_callback it gets the cookie (HttpOnly, SameSite=Strict, Secure
// over https, the service prefix's path, sessionTTL) and is sent to the page. A revoke
// is a POST of the page's form: the cookie, the session's token in the form, the
// issuer's origin and, from a browser that sends them, Sec-Fetch-* headers of a click.

// sessionCookie holds a browser's session of the approvals page.
const sessionCookie = "jupyter-mcp-sidecar-session"

// sessionTTL is how long a session of the approvals page lasts.
const sessionTTL = 15 * time.Minute

// session is a browser signed in to the approvals page.
type session struct {
	user string
	csrf string // the revoke forms' token
}

// consentsPath is the approvals page's path under the issuer's.
const consentsPath = "/oauth/consents"

// consentsPage shows the signed-in user's approvals, else sends the browser to sign in.
func (s *Server) consentsPage(w http.ResponseWriter, r *http.Request) {
	if !topLevel(r) {
		http.Error(w, "open this page in the browser's window, not from a script or a frame", http.StatusForbidden)
		return
	}
	if sess, ok := s.session(r); ok {
		s.showApprovals(w, sess)
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		// The session cookie (SameSite=Strict) would not come back along a chain that
		// started at another site: a link of the origin's own starts a chain that does.
		nonce := s.pageHeaders(w, "")
		_ = signInPage.Execute(w, map[string]string{"Nonce": nonce, "Self": s.base + consentsPath})
		return
	}
	s.toHub(w, r, flow{manage: true, hubVerifier: random() + random()})
}

// signedIn ends a sign-in to the approvals page at oauth_callback: the Hub's code for
// the user's Hub token, which names the user, who gets a session.
func (s *Server) signedIn(w http.ResponseWriter, r *http.Request, tok string, err error) {
	if r.URL.Query().Get("error") != "" {
		http.Error(w, "the Hub did not sign you in", http.StatusForbidden)
		return
	}
	if err != nil {
		s.log.Warn("hub token exchange failed", "err", err)
		http.Error(w, "the Hub's token exchange failed", http.StatusBadGateway)
		return
	}
	user, err := s.cfg.Verify(r.Context(), tok)
	if err != nil || user == "" {
		http.Error(w, "this Hub user may not use the service", http.StatusForbidden)
		return
	}
	secret := random()
	s.logins.put(hash(secret), session{user: user, csrf: random()}, sessionTTL)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: secret, Path: s.base + "/", MaxAge: int(sessionTTL.Seconds()),
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, s.base+consentsPath, http.StatusSeeOther)
}

// session is the browser's session of the approvals page, from its cookie.
func (s *Server) session(r *http.Request) (session, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || len(ck.Value) != randomLen {
		return session{}, false
	}
	return s.logins.get(hash(ck.Value))
}

func (s *Server) showApprovals(w http.ResponseWriter, sess session) {
	type row struct{ Name, ClientID, RedirectURI, At string }
	var rows []row
	for _, a := range s.approvals(sess.user) {
		name := a.name
		if name == "" {
			name = "(no name given)"
		}
		rows = append(rows, row{name, a.clientID, a.redirectURI, a.at.UTC().Format(time.RFC3339)})
	}
	nonce := s.pageHeaders(w, "")
	err := approvalsPage.Execute(w, map[string]any{"Nonce": nonce, "User": sess.user, "CSRF": sess.csrf, "Action": s.base + consentsPath, "Rows": rows})
	if err != nil {
		s.log.Warn("approvals page", "err", err)
	}
}

// revokeFromPage takes a Revoke button's form: the approval it names, of the session's
// user, is revoked with the tokens of the client.
func (s *Server) revokeFromPage(w http.ResponseWriter, r *http.Request) {
	if !s.sameOrigin(r) || !userNavigation(r) {
		http.Error(w, "the form is taken only from a click on the approvals page", http.StatusForbidden)
		return
	}
	sess, ok := s.session(r)
	if !ok {
		http.Error(w, "sign in again: open "+s.base+consentsPath, http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "a form body of at most 16 KiB", http.StatusBadRequest)
		return
	}
	if !equal(r.PostForm.Get("csrf"), sess.csrf) {
		http.Error(w, "the form was not sent from the approvals page this browser was shown", http.StatusForbidden)
		return
	}
	s.revokeApproval(sess.user, r.PostForm.Get("client_id"), r.PostForm.Get("redirect_uri"))
	http.Redirect(w, r, s.base+consentsPath+"?"+url.Values{"revoked": {"1"}}.Encode(), http.StatusSeeOther)
}

var approvalsPage = template.Must(template.New("approvals").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>MCP clients you approved</title>
<style nonce="{{.Nonce}}">body{font-family:system-ui,sans-serif;max-width:50em;margin:3em auto;padding:0 1em;line-height:1.45}
td,th{text-align:left;padding:.3em .6em;vertical-align:top}code{word-break:break-all}bdi{display:inline-block;max-width:100%;overflow:hidden;overflow-wrap:anywhere;vertical-align:bottom}</style>
</head><body><main>
<h1>MCP clients you approved</h1>
<p>Signed in to JupyterHub as <b id="user">{{.User}}</b>. Each client below may list and read your notebooks, as you, when it
logs in through the address shown. Revoking ends every token of yours the client holds at once; its next login asks you again.</p>
{{if .Rows}}<table id="approvals"><thead><tr><th>Client (its own name, not checked)</th><th>Client ID</th><th>Sends you back to</th><th>Approved at</th><th></th></tr></thead><tbody>
{{range .Rows}}<tr><td><bdi dir="auto">{{.Name}}</bdi></td><td><code>{{.ClientID}}</code></td><td><code>{{.RedirectURI}}</code></td><td>{{.At}}</td>
<td><form method="post" action="{{$.Action}}"><input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="client_id" value="{{.ClientID}}"><input type="hidden" name="redirect_uri" value="{{.RedirectURI}}"><button type="submit" data-arm disabled>Revoke</button></form></td></tr>
{{end}}</tbody></table>{{else}}<p id="none">You have approved no MCP client.</p>{{end}}
<noscript><p>Revoking needs JavaScript: it keeps the buttons from taking a click meant for another window.</p></noscript>
<script nonce="{{.Nonce}}">` + armScript + `</script>
</main></body></html>
`))

var signInPage = template.Must(template.New("signin").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>MCP clients you approved</title>
<style nonce="{{.Nonce}}">body{font-family:system-ui,sans-serif;max-width:38em;margin:3em auto;padding:0 1em}</style>
</head><body><main><p><a id="sign-in" href="{{.Self}}">Sign in with JupyterHub</a> to see the MCP clients you approved.</p></main></body></html>
`))
