// Package place decides where replicas run. The Ledger is one node's
// resources (memory, cores, GPU devices) and the replicas that hold them:
// Reserve claims room for a replica, choosing lower-class replicas to stop
// when the node is full, and checks the owners' capacities (OwnerTable).
// Plan is the cluster planner: a pure function from the nodes, the models
// and their load to which node runs which replica. The ledger knows a
// fleet and a replica only through the Holder and Running interfaces.
package place
