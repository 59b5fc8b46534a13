package cluster

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

const peerProofInfo = "llmgw cluster proof hmac-sha256 v1"

// proofKey derives the key that signs heartbeats and shared state from
// the cluster secret (never the secret itself, nor the CA's key).
func proofKey(secret string) []byte {
	k, err := hkdf.Key(sha256.New, []byte(secret), []byte(peerCASalt), peerProofInfo, sha256.Size)
	if err != nil {
		return nil // only for a length hkdf refuses, which sha256.Size is not
	}
	return k
}

// proof is the hex HMAC of the parts, each length-prefixed so that no two
// lists of parts sign the same bytes.
func proof(key []byte, parts ...[]byte) string {
	h := hmac.New(sha256.New, key)
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// beatProofSuffix ends a signed heartbeat: its JSON object gets one more
// member, "proof", over the bytes of the object without it. Nodes that do
// not check proofs read the heartbeat as before.
const beatProofSuffix = `,"proof":"`

// signBeat adds the proof to a heartbeat's JSON object.
func signBeat(key, beat []byte) []byte {
	if len(beat) < 2 || beat[len(beat)-1] != '}' {
		return beat
	}
	p := proof(key, []byte("beat"), beat)
	out := make([]byte, 0, len(beat)+len(beatProofSuffix)+len(p)+2)
	out = append(out, beat[:len(beat)-1]...)
	out = append(out, beatProofSuffix...)
	out = append(out, p...)
	return append(out, '"', '}')
}

// openBeat checks a signed heartbeat and returns it without its proof;
// ok is false when it carries no proof or one made with another secret.
func openBeat(key []byte, signed string) (beat []byte, ok bool) {
	const macLen = 2 * sha256.Size
	n := len(signed) - len(beatProofSuffix) - macLen - 2
	if !hasBeatProof(signed) {
		return nil, false
	}
	beat = append([]byte(signed[:n]), '}')
	got := signed[n+len(beatProofSuffix) : n+len(beatProofSuffix)+macLen]
	return beat, hmac.Equal([]byte(got), []byte(proof(key, []byte("beat"), beat)))
}

// hasBeatProof says whether a heartbeat carries a proof at all: nodes of
// an earlier version sign nothing.
func hasBeatProof(signed string) bool {
	n := len(signed) - len(beatProofSuffix) - 2*sha256.Size - 2
	return n >= 1 && signed[n:n+len(beatProofSuffix)] == beatProofSuffix && strings.HasSuffix(signed, `"}`)
}

// proofField is the state hash's field holding the proof of field k.
func proofField(k string) string { return "proof:" + k }

// fieldProof signs one field of the shared state.
func fieldProof(key []byte, field, value string) string {
	return proof(key, []byte("state"), []byte(field), []byte(value))
}

// fieldTrusted says whether a state field's value may be applied: its
// proof is this cluster's, or it has none and was written by a node of
// an earlier version (which signed nothing). An empty value (a field
// never written) is always trusted.
func fieldTrusted(key []byte, field, value, sig string) bool {
	if value == "" || sig == "" {
		return true
	}
	return hmac.Equal([]byte(sig), []byte(fieldProof(key, field, value)))
}

// errSecretDiffers is why a node is refused: its secret is not the one
// the cluster's live nodes prove.
var errSecretDiffers = errors.New("cluster secret differs from the other nodes'")

// SecretRefused checks, at start, that the live nodes of the cluster
// prove this node's secret. Nodes of this name are this node (restarted)
// and do not count. It returns an error naming the nodes when there are
// live nodes and none proves the secret, nil otherwise (alone, or
// another node proves it, or the store does not answer: the heartbeat
// rounds check again).
func (m *Member) SecretRefused(ctx context.Context) error {
	names, err := m.rdb.SMembers(ctx, m.key(kNodes)).Result()
	if err != nil {
		return nil
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == m.cfg.Node })
	if len(names) == 0 {
		return nil
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = m.key(kNode + n)
	}
	vals, err := m.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil
	}
	var others []string
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue // gone
		}
		if _, ok := openBeat(m.proof, s); ok || !hasBeatProof(s) {
			return nil // proves this secret, or is of an earlier version that signs nothing
		}
		others = append(others, names[i])
	}
	if len(others) == 0 {
		return nil
	}
	return fmt.Errorf("cluster %q: node %s is refused: %w (live nodes %s do not prove this node's secret); give every node the same cluster secret (cluster { secret … })",
		m.cfg.Name, m.cfg.Node, errSecretDiffers, strings.Join(others, ", "))
}

// trustedState returns the shared state as read, without the proof
// fields, with every field whose proof fails replaced by what this node
// applied before (which it logs, once per value). applied is read under
// m.mu by the caller.
func (m *Member) trustedState(fields, applied map[string]string) map[string]string {
	out := make(map[string]string, len(fields))
	for k, v := range fields {
		if strings.HasPrefix(k, "proof:") {
			continue
		}
		if !fieldTrusted(m.proof, k, v, fields[proofField(k)]) {
			if m.untrusted[k] != v {
				m.untrusted[k] = v
				m.logger.Error("ignoring a change of the cluster's shared state that does not prove the cluster secret: a node with another secret wrote it; give every node the same cluster secret",
					zap.String("field", k))
			}
			v = applied[k]
		}
		out[k] = v
	}
	return out
}

// hgetTrusted reads one state field and its proof: redis.Nil when the
// field is not there, trusted false when its proof fails.
func (m *Member) hgetTrusted(ctx context.Context, field string) (b []byte, trusted bool, err error) {
	vals, err := m.rdb.HMGet(ctx, m.key(kState), field, proofField(field)).Result()
	if err != nil {
		return nil, false, err
	}
	v, _ := vals[0].(string)
	sig, _ := vals[1].(string)
	if vals[0] == nil {
		return nil, false, redis.Nil
	}
	return []byte(v), fieldTrusted(m.proof, field, v, sig), nil
}

// signedHSet writes a state field with its proof.
func (m *Member) signedHSet(ctx context.Context, p redis.Pipeliner, field string, value []byte) {
	p.HSet(ctx, m.key(kState), field, value, proofField(field), fieldProof(m.proof, field, string(value)))
}
