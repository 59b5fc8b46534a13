package llmkb

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/openai"
)

// checkQuota refuses an upload of size bytes that would take a level of
// the caller's tenancy past its kb_bytes or kb_files limit: the key's
// (files it uploaded), its project's, team's or organisation's (files of
// the projects below).
func (k *KB) checkQuota(r *http.Request, size int64) *openai.Error {
	t, ok := tenancy.TenantOf(r)
	if !ok {
		return nil
	}
	return k.checkLevels(r.Context(), t, size)
}

// checkLevels is checkQuota for a tenant's levels.
func (k *KB) checkLevels(ctx context.Context, t *tenancy.Tenant, size int64) *openai.Error {
	if !hasKBLimits(t.Levels) {
		return nil
	}
	files, err := list[kbstore.File](ctx, k.svc.store, kbstore.KindFile, "")
	if err != nil {
		return serverError("counting the files your limits cover", err)
	}
	for _, l := range t.Levels {
		if l.Limits.KBBytes == 0 && l.Limits.KBFiles == 0 {
			continue
		}
		n, bytes := usageUnder(files, l, t.KeyID)
		switch {
		case l.Limits.KBFiles > 0 && n+1 > l.Limits.KBFiles:
			return quotaErr(l, fmt.Sprintf("holds %d files, its kb_files limit", n))
		case l.Limits.KBBytes > 0 && bytes+size > l.Limits.KBBytes:
			return quotaErr(l, fmt.Sprintf("holds %s of its kb_bytes limit of %s, and this file (%s) would pass it",
				humanize.IBytes(uint64(bytes)), humanize.IBytes(uint64(l.Limits.KBBytes)), humanize.IBytes(uint64(size))))
		}
	}
	return nil
}

func hasKBLimits(levels []tenancy.Level) bool {
	for _, l := range levels {
		if l.Limits.KBBytes > 0 || l.Limits.KBFiles > 0 {
			return true
		}
	}
	return false
}

// usageUnder counts the files and bytes a level covers.
func usageUnder(files []*kbstore.File, l tenancy.Level, keyID string) (n, bytes int64) {
	for _, f := range files {
		var in bool
		if l.Kind == "key" {
			in = f.Key == keyID
		} else {
			in = f.Owner == l.Name || strings.HasPrefix(f.Owner, l.Name+"/")
		}
		if in {
			n++
			bytes += f.Bytes
		}
	}
	return n, bytes
}

func quotaErr(l tenancy.Level, what string) *openai.Error {
	return &openai.Error{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "kb_quota_exceeded",
		Message: fmt.Sprintf("the knowledge bases of %s %s %s; delete files (DELETE /v1/files/{id}) or ask for a higher limit", l.Kind, l.Name, what)}
}
