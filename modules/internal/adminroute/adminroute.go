// Package adminroute serves the admin routes a request handler declares
// under /llm/<prefix>/ (llm_kb's /llm/kb/…): the llm app serves them on
// the admin endpoint and on llm_admin's sites, with its authentication
// and roles, and hands each request to the handler that registered the
// prefix last. A successful change is recorded in the app's audit log.
package adminroute

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// Op is one route a handler declares.
type Op struct {
	Method string // GET, POST, …
	Path   string // with {parameters}, read with r.PathValue: /llm/kb/stores/{id}
	// Audit is the audit log's action of a successful change ("kb store
	// created"); "" for a route that changes nothing, which is not audited.
	Audit string
}

// declared are the routes of each prefix. Written in init() only, by
// Declare; read afterwards.
var declared = map[string][]Op{}

// Declare declares the routes a handler serves under /llm/<prefix>/ once
// it registers (llm.App.RegisterAdmin). Call it from the handler's
// init(), next to llm.DescribeAdminOperations.
func Declare(prefix string, ops ...Op) {
	declared[prefix] = append(declared[prefix], ops...)
}

// AuditFunc records a change in the audit log.
type AuditFunc func(r *http.Request, action string, fields ...zap.Field)

// Registry holds the handler of each prefix. The zero value is ready.
type Registry struct{ handlers sync.Map }

// Register hands the routes of prefix to h until the returned function
// is called.
func (g *Registry) Register(prefix string, h caddy.AdminHandler) func() {
	g.handlers.Store(prefix, h)
	return func() { g.handlers.CompareAndDelete(prefix, h) }
}

// Routes are the admin routes of every declared prefix; running gives
// the registry and audit log of the running app.
func Routes(running func() (*Registry, AuditFunc, error)) []caddy.AdminRoute {
	var routes []caddy.AdminRoute
	for _, prefix := range slices.Sorted(maps.Keys(declared)) {
		routes = append(routes, caddy.AdminRoute{Pattern: "/llm/" + prefix + "/", Handler: caddy.AdminHandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			g, audit, err := running()
			if err != nil {
				return err
			}
			h, ok := g.handlers.Load(prefix)
			if !ok {
				return apiErr(http.StatusNotFound, "no handler of the config serves /llm/%s/; add it to a site (llm_kb serves /llm/kb/, llm_router /llm/providers/)", prefix)
			}
			return serve(w, r, declared[prefix], h.(caddy.AdminHandler), audit)
		})})
	}
	return routes
}

func apiErr(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

// auditFieldsKey carries a route's audit fields on its request.
type auditFieldsKey struct{}

// AddAuditFields adds fields to the audit log's entry of the change a
// route is making (what its path does not say: the id of what it made,
// a tenant). Outside a declared route it does nothing.
func AddAuditFields(r *http.Request, fields ...zap.Field) {
	if p, ok := r.Context().Value(auditFieldsKey{}).(*[]zap.Field); ok {
		*p = append(*p, fields...)
	}
}

// serve finds the declared route of r, lets h answer it, and audits a
// successful change with the path's parameters and the fields h added.
func serve(w http.ResponseWriter, r *http.Request, ops []Op, h caddy.AdminHandler, audit AuditFunc) error {
	mux := http.NewServeMux()
	var (
		op     *Op
		served error
		fields []zap.Field
	)
	for i := range ops {
		o := &ops[i]
		mux.HandleFunc(o.Method+" "+o.Path, func(w http.ResponseWriter, r *http.Request) {
			op, served = o, h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), auditFieldsKey{}, &fields)))
		})
	}
	if _, pattern := mux.Handler(r); pattern == "" {
		return unmatched(r, ops)
	}
	rec := &statusRecorder{ResponseWriter: w}
	mux.ServeHTTP(rec, r)
	if served != nil || op == nil || op.Audit == "" || rec.status >= 300 {
		return served
	}
	for _, seg := range strings.Split(op.Path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			fields = append(fields, zap.String(name, r.PathValue(name)))
		}
	}
	audit(r, op.Audit, fields...)
	return nil
}

// unmatched is the 404 or 405 of a request no declared route takes.
func unmatched(r *http.Request, ops []Op) error {
	var allowed, routes []string
	for _, o := range ops {
		routes = append(routes, o.Method+" "+o.Path)
		m := http.NewServeMux()
		m.Handle(o.Path, http.NotFoundHandler())
		if _, p := m.Handler(r); p != "" && !slices.Contains(allowed, o.Method) {
			allowed = append(allowed, o.Method)
		}
	}
	if len(allowed) > 0 {
		return apiErr(http.StatusMethodNotAllowed, "%s %s: use %s", r.Method, r.URL.Path, strings.Join(allowed, " or "))
	}
	return apiErr(http.StatusNotFound, "no admin route %s %s; the routes here are %s", r.Method, r.URL.Path, strings.Join(routes, ", "))
}

// statusRecorder keeps the status a route answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer underneath.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
