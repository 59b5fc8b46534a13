// Package weights is the mirror as the llm app uses it: the mirror's
// configuration and its pool across reloads (Open, Close), resolving a
// model's source to files on this node (ResolveSource), checking a source
// before a model is added (SourceChecker), and which catalog models use
// which mirror versions (Use, TrackedModel). The mirror itself (stores,
// manifests, replication) is the mirror package, which imports no Caddy.
package weights
