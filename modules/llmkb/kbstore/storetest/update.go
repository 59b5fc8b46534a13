package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

type counter struct {
	N int `json:"n"`
}

// increment is an Update fn adding one to a counter record.
func increment(body []byte) ([]byte, error) {
	var c counter
	if body != nil {
		if err := json.Unmarshal(body, &c); err != nil {
			return nil, err
		}
	}
	c.N++
	return json.Marshal(c)
}

func testUpdateConcurrent(t *testing.T, s kbstore.Store) {
	must(t, s.Put(ctx(t), kbstore.KindStore, "vs_1", []byte(`{"n":0}`)), "Put")
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() { errs <- s.Update(ctx(t), kbstore.KindStore, "vs_1", increment) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err, "Update")
	}
	wantBody(t, s, kbstore.KindStore, "vs_1", fmt.Appendf(nil, `{"n":%d}`, n))
}

func testUpdateCreates(t *testing.T, s kbstore.Store) {
	calls := 0
	err := s.Update(ctx(t), kbstore.KindBatch, "b1", func(body []byte) ([]byte, error) {
		calls++
		if body != nil {
			return nil, fmt.Errorf("fn got %q for an absent record, want nil", body)
		}
		return []byte(`{"id":"b1"}`), nil
	})
	must(t, err, "Update of an absent record")
	if calls == 0 {
		t.Fatal("Update did not call fn")
	}
	wantBody(t, s, kbstore.KindBatch, "b1", []byte(`{"id":"b1"}`))
	must(t, s.Update(ctx(t), kbstore.KindStore, "vs_new", increment), "Update creating a counter")
	wantBody(t, s, kbstore.KindStore, "vs_new", []byte(`{"n":1}`))
}

func testUpdateDeletes(t *testing.T, s kbstore.Store) {
	must(t, s.Put(ctx(t), kbstore.KindBatch, "b1", []byte(`{"id":"b1"}`)), "Put")
	err := s.Update(ctx(t), kbstore.KindBatch, "b1", func(body []byte) ([]byte, error) {
		if !jsonEqual(t, body, []byte(`{"id":"b1"}`)) {
			return nil, fmt.Errorf("fn got %s, want the record", body)
		}
		return nil, nil
	})
	must(t, err, "Update returning nil")
	wantAbsent(t, s, kbstore.KindBatch, "b1")
	// nil for an absent record that stays absent.
	must(t, s.Update(ctx(t), kbstore.KindBatch, "b2", func([]byte) ([]byte, error) { return nil, nil }), "Update of an absent record returning nil")
	wantAbsent(t, s, kbstore.KindBatch, "b2")
}

func testUpdateError(t *testing.T, s kbstore.Store) {
	must(t, s.Put(ctx(t), kbstore.KindFile, "file-1", []byte(`{"n":1}`)), "Put")
	refused := errors.New("refused")
	err := s.Update(ctx(t), kbstore.KindFile, "file-1", func([]byte) ([]byte, error) {
		return []byte(`{"n":2}`), refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("Update returned %v, want the error fn returned", err)
	}
	wantBody(t, s, kbstore.KindFile, "file-1", []byte(`{"n":1}`))
}
