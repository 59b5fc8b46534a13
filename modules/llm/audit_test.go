package llm

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm/audit"
)

// The audit log's errors reach the admin API with the status of their
// kind and their own words.
func TestAuditStatus(t *testing.T) {
	_, bad := audit.ParseQuery(url.Values{"limit": {"0"}}, time.Now())
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"query", bad, 400},
		{"cursor", audit.ErrCursor, 400},
		{"store down", audit.ErrStoreDown, 502},
		{"storage", errors.New("reading the audit log: disk full"), 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ae caddy.APIError
			if !errors.As(auditStatus(tc.err), &ae) || ae.HTTPStatus != tc.want || ae.Err.Error() != tc.err.Error() {
				t.Errorf("got %+v, want %d with %q", ae, tc.want, tc.err)
			}
		})
	}
}
