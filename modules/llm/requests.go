package llm

import (
	"net/http"
	"os"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm/reqlog"
	"github.com/llmgw/llmgw/modules/openai"
)

// The request log (package reqlog): the handlers hand each request over
// when it ends (RecordRequest); a bbolt file in the data directory keeps
// them on a single node, the cluster's Redis stream in a cluster.

var requestOperations = []operation{
	{"GET", "/llm/requests", "The request log, newest first: ?model= (asked or served), key=, tenant= (and below), api=, node=, status= (404, 4xx, error), error= (code), q= (part of the request id), since=/until= (RFC 3339, or a duration back from now), limit= (1-1000, default 50); before=<next> for older pages, after=<next> for newer records, oldest first (to follow). A tenant admin sees its tenant's only", "/llm/requests", getRequests, ""},
	{"GET", "/llm/requests/{id}", "One request of the log by its id (the X-Request-Id of its answer), with its bodies when its tenant keeps them (request_log bodies) and they have not expired", "/llm/requests/", getRequest, ""},
}

// openRequestLog opens the config's request log, unless it is off.
func (a *App) openRequestLog() error {
	if a.RequestLog != nil && a.RequestLog.Off {
		return nil
	}
	if err := a.RequestLog.Validate(); err != nil {
		return err
	}
	o := reqlog.Options{Node: a.nodeName(), Keep: a.RequestLog.Retention(), Logger: a.logger.Named("requests")}
	if a.cluster != nil {
		m := a.cluster
		o.Key = "redis:" + a.clusterKey
		o.Open = func() (reqlog.Store, error) { return m.RequestLog(), nil }
	} else {
		dir := filepath.Join(caddy.AppDataDir(), "llmgw")
		o.Key = "bolt:" + dir
		o.Open = func() (reqlog.Store, error) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, err
			}
			return reqlog.OpenBolt(filepath.Join(dir, "requests.db"))
		}
	}
	l, release, err := reqlog.Open(o)
	if err != nil {
		return err
	}
	a.reqLog, a.reqLogRelease = l, release
	return nil
}

// RecordRequest hands a request the first llm handler tracked
// (openai.Track) to the request log once its chain has returned.
func (a *App) RecordRequest(t *openai.Tracked) {
	if a != nil && a.reqLog != nil && (t.API != "" || t.Tool != "") {
		a.reqLog.Add(t)
	}
}

// KeepsBodies says whether the request log keeps the bodies of the
// requests of tenant (org/team/project).
func (a *App) KeepsBodies(tenant string) bool {
	return a != nil && a.reqLog != nil && a.RequestLog.KeepsBodies(tenant)
}

func getRequests(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	return a.reqLog.ServeList(w, r)
}

func getRequest(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	id := r.URL.Path[len("/llm/requests/"):]
	return a.reqLog.ServeOne(w, r, id)
}
