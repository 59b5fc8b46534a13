package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llmgw/llmgw/modules/llm/audit"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// openAudit gives the config its audit log: this node's storage, and the
// cluster's stream when the node is in one (audit_store.go).
func (a *App) openAudit() {
	o := audit.Options{Storage: a.local, Config: a.Audit, Logger: a.logger, Now: now}
	if a.cluster != nil {
		o.Store = a.cluster
	}
	a.auditLog = audit.Open(o)
}

// audit logs an administrative change with who made it, and records it
// in the audit log. Its string values come from requests (the actor
// header, ids, names), so each is cut to a bounded length.
func (a *App) audit(r *http.Request, msg string, fields ...zap.Field) {
	actor := catalog.BoundedLog(r.Header.Get("X-Llmgw-Actor"))
	if actor == "" {
		actor = "unknown"
	}
	for i, f := range fields {
		if f.Type == zapcore.StringType && len(f.String) > catalog.MaxLogValue {
			fields[i].String = catalog.BoundedLog(f.String)
		}
	}
	at := now().UTC()
	a.logger.Named("audit").Info(msg, append(fields, zap.String("actor", actor), zap.Time("at", at))...)
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		if f.Type == zapcore.ByteStringType && json.Valid(f.Interface.([]byte)) {
			enc.Fields[f.Key] = json.RawMessage(f.Interface.([]byte))
			continue
		}
		f.AddTo(enc)
	}
	e := llmapi.AuditEntry{Time: at, Actor: actor, Action: msg, Node: a.nodeName(), Fields: enc.Fields}
	if a.auditLog == nil {
		return // an app that was not provisioned, in a test
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
	defer cancel()
	a.auditLog.Record(ctx, e)
}

// getAudit answers GET /llm/audit?since=&until=&actor=&action=&model=&limit=&cursor=.
func getAudit(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	q, err := audit.ParseQuery(r.URL.Query(), now())
	if err != nil {
		return auditStatus(err)
	}
	p, err := a.auditLog.Read(r.Context(), q)
	if err != nil {
		return auditStatus(err)
	}
	return writeJSON(w, p)
}

// auditStatus is the admin API's answer to an error of the audit log:
// 400 for the client's query or cursor, 502 when the cluster's stream
// does not answer a page only it has, 500 for this node's storage.
func auditStatus(err error) error {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, audit.ErrQuery), errors.Is(err, audit.ErrCursor):
		status = http.StatusBadRequest
	case errors.Is(err, audit.ErrStoreDown):
		status = http.StatusBadGateway
	}
	return caddy.APIError{HTTPStatus: status, Err: err}
}
