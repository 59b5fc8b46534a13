// Package cluster makes one gateway of several llmgw nodes. The Member is
// this node's membership: heartbeats with a TTL in Redis (with Sentinel),
// the leader lease under which the planner (package place) runs once for
// the cluster, the shared state (runtime models, settings, keys, tenancy)
// with a version and a change lock, the Caddy storage and response store
// kept in Redis, and the node-to-node endpoint. The app of this node is
// reached only through the Local interface it attaches, so nothing here
// imports the app.
//
// The node-to-node hop: the router on node A reaches a replica that runs
// on node B through B's llmgw, never through B's engine, which listens on
// B's loopback only: A sends the request to B's peer endpoint, which
// forwards the bytes to the local engine server and streams the answer
// back, both ways without parsing or buffering. Nodes authenticate each
// other with certificates that chain to a CA every node derives from the
// same cluster secret. Nodes speak HTTP/1.1 to each other over kept-alive
// TLS 1.3 connections; the endpoint still accepts HTTP/2, from nodes of an
// earlier version during a rolling upgrade.
package cluster
