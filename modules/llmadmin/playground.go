package llmadmin

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/llmgw/llmgw/modules/llm"
)

// playground lets a console session use the models on /v1 of the same
// site (the console's playground), through llm_quota, which asks the llm
// app (llm.App.SessionTenant): a request is the session's only with its
// cookie and its CSRF token, so another site cannot spend it. Admins and
// operators act as themselves without a tenant's limits, a tenant admin
// at its node's limits; a viewer only reads.
type playground struct{ h *Handler }

// SessionCaller implements llm.SessionAuth.
func (p playground) SessionCaller(r *http.Request) (llm.Caller, string, bool, error) {
	if sessionCookie(r) == "" {
		return llm.Caller{}, "", false, nil
	}
	id, sess, err := p.h.fromSession(r)
	if err != nil || id == nil {
		return llm.Caller{}, "", false, nil // no live session: the key decides
	}
	if !csrfOK(r, sess) {
		return llm.Caller{}, "", false, fmt.Errorf("%s", errCSRF)
	}
	c := llm.Caller{Actor: id.actor, Role: id.role.String()}
	switch id.role {
	case roleAdmin, roleOperator:
		return c, "", true, nil
	case roleTenant:
		return c, strings.Join(id.scope.parts, "/"), true, nil
	}
	return c, "", false, fmt.Errorf("%s is a %s: using models from the console needs the operator or admin role, or a tenant admin's; use an API key", id.actor, id.role)
}
