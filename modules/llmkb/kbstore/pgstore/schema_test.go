package pgstore

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore/pgstore/pgtest"
)

// TestSchema opens a fresh database from several nodes at once (each
// migration applied once, under the advisory lock), opens it again
// (nothing to do), and refuses tables of a newer schema than it knows.
func TestSchema(t *testing.T) {
	dsn, _, _ := pgtest.Start(t)
	db := pgtest.Database(t, dsn)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { open(t, db) })
	}
	wg.Wait()
	open(t, db)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var versions []int32
	rows, _ := conn.Query(ctx, `SELECT version FROM llmgw_kb_schema ORDER BY version`)
	if versions, err = pgx.CollectRows(rows, pgx.RowTo[int32]); err != nil {
		t.Fatal(err)
	}
	if len(versions) != len(migrations) || versions[len(versions)-1] != int32(len(migrations)) {
		t.Fatalf("schema versions %v, want 1…%d once each", versions, len(migrations))
	}
	if _, err := conn.Exec(ctx, `INSERT INTO llmgw_kb_schema (version) VALUES (99)`); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = Open(c, db)
	if err == nil || !strings.Contains(err.Error(), "schema version 99, newer than this llmgw knows") {
		t.Fatalf("Open of a newer schema = %v, want it refused with what to do", err)
	}
}

// TestUpdateAcrossNodes increments one counter from two stores on one
// database, as two nodes: no increment is lost.
func TestUpdateAcrossNodes(t *testing.T) {
	dsn, _, _ := pgtest.Start(t)
	db := pgtest.Database(t, dsn)
	nodes := []*Store{open(t, db), open(t, db)}
	inc := func(body []byte) ([]byte, error) {
		var c struct{ N int }
		if body != nil {
			if err := json.Unmarshal(body, &c); err != nil {
				return nil, err
			}
		}
		c.N++
		return json.Marshal(c)
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			if err := nodes[i%2].Update(t.Context(), kbstore.KindStore, "vs_1", inc); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	body, err := nodes[0].Get(t.Context(), kbstore.KindStore, "vs_1")
	if err != nil || string(body) != `{"N": 100}` {
		t.Fatalf("counter = %s, %v; want {\"N\": 100}", body, err)
	}
}

// TestTextKept stores what PostgreSQL's text cannot hold: NUL bytes are
// dropped and invalid UTF-8 becomes U+FFFD, instead of the whole file
// failing.
func TestTextKept(t *testing.T) {
	dsn, _, _ := pgtest.Start(t)
	s := open(t, pgtest.Database(t, dsn))
	c := kbstore.Chunk{Store: "vs_1", File: "file-1", Text: "a\x00b\xffc"}
	if err := s.PutChunks(t.Context(), "vs_1", "file-1", []kbstore.Chunk{c}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Chunks(t.Context(), []kbstore.ChunkRef{{Store: "vs_1", File: "file-1"}})
	if err != nil || len(got) != 1 || got[0].Text != "ab\uFFFDc" {
		t.Fatalf("Chunks = %+v, %v; want the text %q", got, err, "ab\uFFFDc")
	}
}
