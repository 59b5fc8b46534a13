package llm

// What reaches the other nodes at once instead of at the next heartbeat:
// a change made on the leader is placed at once (member.change), and a
// replica that becomes ready is announced at once, so every node routes
// to it (and a node keeping a replica the plan moved away, see
// makeBeforeBreak, lets it go) within a round trip to the store.

// announceReady is called by a fleet when one of its replicas becomes
// ready: the node heartbeats now and tells every node to read the
// heartbeats (the changes channel's "nodes"), which they do at once.
func (m *member) announceReady() {
	m.tell.Store(true)
	m.beatNow()
}
