package llmkb

import (
	"context"
	"crypto/rand"
	"encoding/json"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// get reads a record of kind into v.
func get(ctx context.Context, st kbstore.Store, kind, id string, v any) error {
	b, err := st.Get(ctx, kind, id)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// put writes v as a record of kind.
func put(ctx context.Context, st kbstore.Store, kind, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return st.Put(ctx, kind, id, b)
}

// update changes a record of type T atomically: fn gets the record (nil
// when absent) and returns it changed, or nil to delete it, or an error
// to leave it as it was.
func update[T any](ctx context.Context, st kbstore.Store, kind, id string, fn func(*T) (*T, error)) error {
	return st.Update(ctx, kind, id, func(body []byte) ([]byte, error) {
		var cur *T
		if body != nil {
			cur = new(T)
			if err := json.Unmarshal(body, cur); err != nil {
				return nil, err
			}
		}
		next, err := fn(cur)
		if err != nil || next == nil {
			return nil, err
		}
		return json.Marshal(next)
	})
}

// list reads every record of kind whose id starts with prefix.
func list[T any](ctx context.Context, st kbstore.Store, kind, prefix string) ([]*T, error) {
	var out []*T
	err := st.List(ctx, kind, prefix, func(_ string, body []byte) error {
		v := new(T)
		if err := json.Unmarshal(body, v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

func getStoreFile(ctx context.Context, st kbstore.Store, id string) (*kbstore.StoreFile, error) {
	sf := new(kbstore.StoreFile)
	return sf, get(ctx, st, kbstore.KindStoreFile, id, sf)
}

func getVectorStore(ctx context.Context, st kbstore.Store, id string) (*kbstore.VectorStore, error) {
	vs := new(kbstore.VectorStore)
	return vs, get(ctx, st, kbstore.KindStore, id, vs)
}

func getFile(ctx context.Context, st kbstore.Store, id string) (*kbstore.File, error) {
	f := new(kbstore.File)
	return f, get(ctx, st, kbstore.KindFile, id, f)
}

const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// randID is n random letters and digits.
func randID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idChars[int(b[i])%len(idChars)]
	}
	return string(b)
}
