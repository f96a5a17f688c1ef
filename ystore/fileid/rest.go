package fileid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrStatus is returned when the server answers neither 200 nor 404.
var ErrStatus = errors.New("unexpected http status")

// DefaultRESTTimeout bounds one REST lookup when RESTConfig.Timeout is zero.
const DefaultRESTTimeout = 5 * time.Second

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

// REST resolves ids with jupyter_server_fileid's GET /api/fileid/path/<id>, which
// answers the API path as plain text, or 404.
type REST struct {
	base   *url.URL
	token  string
	client *http.Client
	limit  time.Duration
}

var _ Resolver = (*REST)(nil)

// NewREST returns a REST resolver; it does no I/O.
func NewREST(cfg RESTConfig) (*REST, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("base url %q: %w", cfg.BaseURL, ErrConfig)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
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
	u := r.base.JoinPath("api", "fileid", "path", fileID)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("file id %s: %w", fileID, err)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "token "+r.token)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("file id %s: %w", fileID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("file id %s: read answer: %w", fileID, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return string(body), nil
	case http.StatusNotFound:
		return "", fmt.Errorf("file id %s from %s: %w", fileID, r.base.Redacted(), ErrNotFound)
	default:
		return "", fmt.Errorf("file id %s from %s: %s: %w", fileID, r.base.Redacted(), resp.Status, ErrStatus)
	}
}
