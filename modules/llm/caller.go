package llm

import "context"

// Caller is who makes an admin request, as llm_admin authenticated it:
// the actor written in the audit log and the caller's role (admin,
// operator, viewer or tenant_admin).
type Caller struct {
	Actor string
	Role  string
}

type callerKey struct{}

// WithCaller returns ctx carrying the caller of an admin request.
// llm_admin sets it before it hands a request to an admin route.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the caller of an admin request; ok is false when the
// request did not come through llm_admin (Caddy's own admin endpoint,
// which is the host owner's).
func CallerOf(ctx context.Context) (c Caller, ok bool) {
	c, ok = ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// HostOwner reports whether an admin request may do what only the
// owner of the host may decide at run time (such as adding a command
// that llmgw runs): it came to Caddy's own admin endpoint, or through
// llm_admin with the admin role.
func HostOwner(ctx context.Context) bool {
	c, ok := CallerOf(ctx)
	return !ok || c.Role == "admin"
}
