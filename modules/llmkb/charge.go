package llmkb

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// charge counts embedding tokens against a key's token limits and budget
// and into its usage (through llm_quota, when it runs): the key that
// uploaded a file, or the one that asked a query. Nothing is charged
// for work without a key.
func (s *service) charge(ctx context.Context, key, project, model string, tokens int64) {
	err := s.app().Charge(context.WithoutCancel(ctx), tenancy.Charge{Key: key, Project: project, Model: model, PromptTokens: tokens})
	if err != nil {
		s.log().Warn("knowledge bases: charging embedding tokens", zap.String("key", key), zap.String("embedder", model),
			zap.Int64("prompt_tokens", tokens), zap.Error(err))
	}
}

// checkRoom fails a file, before it is embedded, whose uploading key (or
// a level above it) has used up its tokens per day or its budget: the
// import would spend tokens the tenant no longer has. The file fails at
// once, with the limit named in its last_error, rather than waiting up
// to a day or a month for the window to renew; once it renews, the file
// can be removed from the store and added again. A quota store that
// cannot be read does not stop an import.
func (s *service) checkRoom(ctx context.Context, f *kbstore.File) error {
	err := s.app().Room(ctx, f.Key, f.Owner)
	var le *tenancy.LimitError
	if errors.As(err, &le) {
		return &failure{kbstore.LastError{Code: le.Code, Message: fmt.Sprintf(
			"embedding this file counts against the tokens of the key that uploaded it (%s), and %s; then remove the file from the store and add it again", f.Key, le.Message)}}
	}
	if err != nil {
		if c := s.log().Check(zapcore.DebugLevel, "knowledge bases: reading the uploading key's limits; embedding anyway"); c != nil {
			c.Write(zap.String("file", f.ID), zap.String("key", f.Key), zap.Error(err))
		}
	}
	return nil
}
