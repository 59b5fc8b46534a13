// Package catalog holds what the llm app knows about a model before it
// runs: Model and its Scaling, Resources, Canary, Price and Adapters, the
// classes and weight formats, the rules for names, and the Catalog that
// finds a model by name, alias or adapter. It imports nothing of the app:
// every layer above (the planner, the fleet, the cluster, the app and the
// handlers) reads it.
package catalog
