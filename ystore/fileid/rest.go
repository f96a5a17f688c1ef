package fileid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
)

// ErrStatus is returned when the server's answer is not the file id handler's: a status
// other than 200 and 404 (403 for a wrong token), or a 404 that is not the handler's JSON
// (no such route: jupyter_server_fileid not loaded, or a wrong base URL).
var ErrStatus = errors.New("unexpected http status")

// ErrAnswer is returned when a 200 answer is not the JSON the handler writes for the id
// asked about, or is larger than MaxRESTAnswer.
var ErrAnswer = errors.New("malformed file id answer")

// DefaultRESTTimeout bounds one REST lookup when RESTConfig.Timeout is zero.
const DefaultRESTTimeout = 5 * time.Second

// MaxRESTAnswer bounds the body of one REST answer; a larger one is refused (ErrAnswer).
const MaxRESTAnswer = 64 << 10

// RESTConfig configures a REST resolver.
type RESTConfig struct {
	// BaseURL is the Jupyter server's base URL, e.g. http://127.0.0.1:8888/ (with any
	// base_url prefix).
	BaseURL string
	// Token is the Jupyter server token, sent as "Authorization: token <Token>".
	Token string
	// Timeout bounds one lookup; DefaultRESTTimeout if zero.
	Timeout time.Duration
	// Client makes the requests; http.DefaultClient if nil.
	Client *http.Client
}

// Validate reports what is wrong with cfg, a *keyerr.KeyError naming its field in snake
// case (sidecar/config renames it to the daemon's key): a base URL that is not http(s).
func (cfg RESTConfig) Validate() error {
	if u, err := url.Parse(cfg.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return keyerr.Invalid("base_url", "must be an http(s) URL, got %q", cfg.BaseURL)
	}
	return nil
}

// REST resolves ids with jupyter_server_fileid's FilePathHandler (0.6 and later):
// GET /api/fileid/path?id=<id>, which answers 200 with the JSON {"id": …, "path": …}
// (path relative to the server's root_dir, with either file id manager), or 404 with
// {"message": …, "reason": …} when the manager knows no such id or its file is outside
// the root.
type REST struct {
	base   *url.URL
	token  string
	client *http.Client
	limit  time.Duration
}

var _ Resolver = (*REST)(nil)

// NewREST returns a REST resolver; it does no I/O.
func NewREST(cfg RESTConfig) (*REST, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	u, _ := url.Parse(cfg.BaseURL)
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	r := &REST{base: u, token: cfg.Token, client: cfg.Client, limit: cfg.Timeout}
	if r.client == nil {
		r.client = http.DefaultClient
	}
	if r.limit == 0 {
		r.limit = DefaultRESTTimeout
	}
	return r, nil
}

// Path asks the server for fileID's path.
func (r *REST) Path(ctx context.Context, fileID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.limit)
	defer cancel()
	u := r.base.JoinPath("api", "fileid", "path")
	u.RawQuery = url.Values{"id": {fileID}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("file id %s: %w", fileID, err)
	}
	req.Header.Set("Accept", "application/json")
	if r.token != "" {
		req.Header.Set("Authorization", "token "+r.token)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("file id %s: %w", fileID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxRESTAnswer+1))
	if err != nil {
		return "", fmt.Errorf("file id %s: read answer: %w", fileID, err)
	}
	p, err := decodeAnswer(resp.StatusCode, resp.Header.Get("Content-Type"), body, fileID)
	if err != nil {
		return "", fmt.Errorf("file id %s from %s: %s: %w", fileID, r.base.Redacted(), resp.Status, err)
	}
	return p, nil
}

// pathAnswer is the JSON FilePathHandler writes: the id asked about and its path.
type pathAnswer struct {
	ID   *string `json:"id"`
	Path *string `json:"path"`
}

// errorAnswer is the JSON Jupyter's APIHandler.write_error writes for an HTTPError.
type errorAnswer struct {
	Message *string `json:"message"`
}

// decodeAnswer turns one answer of the path handler into the API path of id: for 200 the
// "path" of the handler's JSON ("." — the root itself — becomes "", as in apiPath), for
// the handler's JSON 404 ErrNotFound, otherwise ErrStatus or ErrAnswer. It is pure.
func decodeAnswer(status int, contentType string, body []byte, id string) (string, error) {
	if len(body) > MaxRESTAnswer {
		return "", fmt.Errorf("answer over %d bytes: %w", MaxRESTAnswer, ErrAnswer)
	}
	isJSON := false
	if mt, _, err := mime.ParseMediaType(contentType); err == nil {
		isJSON = mt == "application/json"
	}
	switch status {
	case http.StatusOK:
		var a pathAnswer
		if !isJSON {
			return "", fmt.Errorf("content type %q: %w", contentType, ErrAnswer)
		}
		if err := json.Unmarshal(body, &a); err != nil {
			return "", fmt.Errorf("%w: %w", ErrAnswer, err)
		}
		switch {
		case a.ID == nil || a.Path == nil:
			return "", fmt.Errorf("no id or path: %w", ErrAnswer)
		case *a.ID != id:
			return "", fmt.Errorf("answer for id %q: %w", *a.ID, ErrAnswer)
		case *a.Path == ".":
			return "", nil
		}
		return *a.Path, nil
	case http.StatusNotFound:
		var a errorAnswer
		if isJSON && json.Unmarshal(body, &a) == nil && a.Message != nil {
			return "", ErrNotFound
		}
		return "", fmt.Errorf("not the file id handler's 404 (is jupyter_server_fileid >= 0.6 loaded, the base URL right?): %w", ErrStatus)
	default:
		return "", ErrStatus
	}
}
