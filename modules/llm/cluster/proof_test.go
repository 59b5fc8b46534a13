package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

const (
	proofSecret = "the-cluster-secret-0123456789abcdef0123"
	otherSecret = "another-secret-0123456789abcdef0123456789"
)

// testMember is a member of cluster "c" on rdb with secret, without
// loops or a peer endpoint.
func testMember(rdb *redis.Client, node, secret string) *Member {
	return &Member{cfg: ClusterConfig{Name: "c", Node: node}, rdb: rdb, prefix: "llmgw:c:", logger: zap.NewNop(),
		proof: proofKey(secret), applied: map[string]string{}, untrusted: map[string]string{}, refused: map[string]string{},
		gone: map[string]time.Time{}}
}

// writeBeat writes a heartbeat of node as m's round does.
func writeBeat(t *testing.T, m *Member, node string) {
	t.Helper()
	b, _ := json.Marshal(&NodeBeat{Name: node, Addr: "127.0.0.9:1", At: time.Now(), Started: time.Now()})
	ctx := context.Background()
	if err := m.rdb.SAdd(ctx, m.key(kNodes), node).Err(); err != nil {
		t.Fatal(err)
	}
	if err := m.rdb.Set(ctx, m.key(kNode+node), signBeat(m.proof, b), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestClusterSecretProof(t *testing.T) {
	rdb := startTestRedis(t)
	ctx := context.Background()
	good := testMember(rdb, "n1", proofSecret)
	good2 := testMember(rdb, "n2", proofSecret)
	wrong := testMember(rdb, "w", otherSecret)
	writeBeat(t, good, "n1")

	// A node with another secret is refused at start, saying why.
	err := wrong.SecretRefused(ctx)
	if !errors.Is(err, errSecretDiffers) || !strings.Contains(err.Error(), "cluster secret differs from the other nodes'") || !strings.Contains(err.Error(), "n1") {
		t.Fatalf("start with another secret: %v, want the secret named as the cause and n1 as the node", err)
	}
	if err := good2.SecretRefused(ctx); err != nil {
		t.Fatalf("start with the cluster's secret: %v", err)
	}

	// Its heartbeat is not a member: not listed. A node of an earlier
	// version, which signs nothing, is (a rolling upgrade).
	writeBeat(t, wrong, "w")
	old, _ := json.Marshal(&NodeBeat{Name: "old", Addr: "127.0.0.8:1"})
	rdb.Set(ctx, good.key(kNode+"old"), old, time.Minute)
	names := []string{"n1", "w", "old"}
	beats, err := rdb.MGet(ctx, good.key(kNode+"n1"), good.key(kNode+"w"), good.key(kNode+"old")).Result()
	if err != nil {
		t.Fatal(err)
	}
	nodes := good2.readBeats(ctx, names, beats, &NodeBeat{Name: "n2"})
	if _, ok := nodes["w"]; ok || nodes["n1"] == nil || nodes["old"] == nil {
		t.Fatalf("members read: %v, want n1 and old, not w", keysOf(nodes))
	}

	// Its writes are not applied; the cluster's are.
	if err := (redisState{wrong}).Store(ctx, keysStorageKey, []byte(`[{"id":"minted-by-w"}]`)); err != nil {
		t.Fatal(err)
	}
	if err := good2.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if v := good2.applied[keysStorageKey]; v != "" {
		t.Fatalf("applied %q written by a node with another secret", v)
	}
	if b, err := (redisState{good2}).Load(ctx, keysStorageKey); err == nil {
		t.Fatalf("loaded %q written by a node with another secret", b)
	}
	if err := (redisState{good}).Store(ctx, keysStorageKey, []byte(`[{"id":"k1"}]`)); err != nil {
		t.Fatal(err)
	}
	if err := good2.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if v := good2.applied[keysStorageKey]; v != `[{"id":"k1"}]` {
		t.Fatalf("applied %q, want the cluster's own write", v)
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestBeatProofRoundTrip(t *testing.T) {
	key := proofKey(proofSecret)
	b := []byte(`{"name":"n1","addr":"x"}`)
	signed := signBeat(key, b)
	got, ok := openBeat(key, string(signed))
	if !ok || string(got) != string(b) {
		t.Fatalf("openBeat = %q, %v; want %q, true", got, ok, b)
	}
	var nb NodeBeat
	if err := json.Unmarshal(signed, &nb); err != nil || nb.Name != "n1" {
		t.Fatalf("a signed heartbeat is not a heartbeat to a node of an earlier version: %v", err)
	}
	for name, s := range map[string]string{
		"other secret": string(signBeat(proofKey(otherSecret), b)),
		"no proof":     string(b),
		"changed":      strings.Replace(string(signed), `"x"`, `"y"`, 1),
		"empty":        "",
	} {
		if _, ok := openBeat(key, s); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// keysStorageKey is a field of the shared state, as the app names its
// keys.
const keysStorageKey = "llmgw/keys.json"
