// Package llmapi holds the JSON shapes of the llm app's admin API (/llm/*):
// models and replicas, keys, tenants, nodes and the plan, rollouts and
// updates, weights, the audit log, guardrail history and the overview.
// It is types only, so that the app, the admin site, the command-line
// client and tests share one definition of every body without importing
// the app.
package llmapi
