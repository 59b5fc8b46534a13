package reqlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// ServeList answers GET /llm/requests: a page of the log as the query's
// filter asks (see ParseFilter).
func (l *Log) ServeList(w http.ResponseWriter, r *http.Request) error {
	if l == nil {
		return apiErr(http.StatusNotFound, "the request log is off in this config (request_log off); remove that to keep one")
	}
	f, err := ParseFilter(r.URL.Query(), time.Now())
	if err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	p, err := l.Page(r.Context(), f)
	if err != nil {
		return storeErr(err)
	}
	return writeJSON(w, p)
}

// ServeOne answers GET /llm/requests/{id}: one request, with its bodies
// when they were kept and have not expired. With ?tenant= (as llm_admin
// sets it for a tenant admin) a request of another tenant is not found.
func (l *Log) ServeOne(w http.ResponseWriter, r *http.Request, id string) error {
	if l == nil {
		return apiErr(http.StatusNotFound, "the request log is off in this config (request_log off); remove that to keep one")
	}
	if id == "" || len(id) > 128 || strings.ContainsAny(id, "/ ") {
		return apiErr(http.StatusBadRequest, "name a request by its id (req_…, the X-Request-Id of its answer)")
	}
	d, err := l.Get(r.Context(), id)
	if t := r.URL.Query().Get("tenant"); err == nil && t != "" && d.Tenant != t && !strings.HasPrefix(d.Tenant, t+"/") {
		err = ErrNotFound // another tenant's, answered as one the log does not hold
	}
	if errors.Is(err, ErrNotFound) {
		return apiErr(http.StatusNotFound, "request %s is not in the log: it is older than the log keeps, or was never answered here (GET /llm/requests lists the ones kept)", id)
	}
	if err != nil {
		return storeErr(err)
	}
	return writeJSON(w, d)
}

func storeErr(err error) error {
	if errors.Is(err, ErrCursor) {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	return apiErr(http.StatusServiceUnavailable, "reading the request log: %v; try again shortly", err)
}

func apiErr(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}
