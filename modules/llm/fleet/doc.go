// Package fleet runs the replicas of one model on this node: the Fleet
// starts them through the model's engine plugin, holds requests while one
// starts, supervises them (health, restarts with backoff, idle stops),
// drains them, rolls them for a change, and picks one for a request with
// a Selector. A Replica's State is a typed enum. What a fleet needs of the
// app that runs it now (the cluster, the mirror) comes through Hooks on
// the process's Node, which also holds the ledger (package place) and the
// replicas still draining after a reload.
package fleet
