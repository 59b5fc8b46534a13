package reqlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// The buckets of a Bolt file: records by key (the answer's end in Unix
// nanoseconds and a sequence number, 16 bytes big-endian, so keys sort
// by end) and kept bodies by key. A request is found by its id from the
// arrival its id holds: its answer ended after it.
var (
	bucketRecords = []byte("records")
	bucketBodies  = []byte("bodies")
)

// Bolt is the log of a single node, in a bbolt file. Append is called
// by one goroutine (the Log's); reads run beside it.
type Bolt struct {
	db  *bolt.DB
	seq uint64 // the next key's sequence; Append's goroutine only
	n   int    // records held; Append's goroutine only
}

// OpenBolt opens (or makes) the log's file.
func OpenBolt(path string) (*Bolt, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("opening the request log %s: %w", path, err)
	}
	b := &Bolt{db: db, seq: rand.Uint64() >> 16}
	err = db.Update(func(tx *bolt.Tx) error {
		_ = tx.DeleteBucket([]byte("ids")) // an index files of earlier versions kept
		for _, name := range [][]byte{bucketRecords, bucketBodies} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		b.n = tx.Bucket(bucketRecords).Stats().KeyN
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening the request log %s: %w", path, err)
	}
	return b, nil
}

// Close closes the file.
func (b *Bolt) Close() error { return b.db.Close() }

func (b *Bolt) key(end time.Time) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, uint64(end.UnixNano()))
	b.seq++
	binary.BigEndian.PutUint64(k[8:], b.seq)
	return k
}

// Append writes es and then applies keep, in one transaction.
func (b *Bolt) Append(_ context.Context, es []Entry, keep Retention) error {
	added := 0
	err := b.db.Update(func(tx *bolt.Tx) error {
		recs, bodies := tx.Bucket(bucketRecords), tx.Bucket(bucketBodies)
		// Keys come in order: full pages split less.
		recs.FillPercent, bodies.FillPercent = 1, 1
		for i := range es {
			k := b.key(es[i].Rec.End)
			v, err := Encode(&es[i].Rec)
			if err != nil {
				return err
			}
			if err := recs.Put(k, v); err != nil {
				return err
			}
			if es[i].Bodies != nil {
				bv, _ := json.Marshal(es[i].Bodies)
				if err := bodies.Put(k, bv); err != nil {
					return err
				}
			}
			added++
		}
		return b.trim(tx, keep, &added)
	})
	if err == nil {
		b.n += added
	}
	return err
}

// trim drops the records beyond keep (oldest first) and the bodies
// older than its body age. added counts the records added less those
// dropped.
func (b *Bolt) trim(tx *bolt.Tx, keep Retention, added *int) error {
	now := time.Now()
	recs, bodies := tx.Bucket(bucketRecords), tx.Bucket(bucketBodies)
	// The keys to drop are read in one pass, then dropped: a cursor's
	// Next after its Delete skips a key.
	var drop [][]byte
	c := recs.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		tooMany := keep.MaxRecords > 0 && b.n+*added-len(drop) > keep.MaxRecords
		tooOld := keep.MaxAge > 0 && keyTime(k).Before(now.Add(-keep.MaxAge))
		if !tooMany && !tooOld {
			break
		}
		drop = append(drop, k)
	}
	for _, k := range drop {
		_ = bodies.Delete(k)
		if err := recs.Delete(k); err != nil {
			return err
		}
	}
	*added -= len(drop)
	if keep.BodyMaxAge <= 0 {
		return nil
	}
	drop = drop[:0]
	bc := bodies.Cursor()
	for k, _ := bc.First(); k != nil && keyTime(k).Before(now.Add(-keep.BodyMaxAge)); k, _ = bc.Next() {
		drop = append(drop, k)
	}
	for _, k := range drop {
		if err := bodies.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func keyTime(k []byte) time.Time { return time.Unix(0, int64(binary.BigEndian.Uint64(k))) }

// arrival is the arrival a request id holds (openai.NewRequestID):
// req_ and 12 hex digits of Unix milliseconds.
func arrival(id string) (time.Time, bool) {
	if len(id) < 16 || id[:4] != "req_" {
		return time.Time{}, false
	}
	ms, err := strconv.ParseUint(id[4:16], 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(ms)), true
}

// findFrom finds the record of id among those that ended from its
// arrival on, reading at most maxScan of them (only their ids).
func findFrom(c *bolt.Cursor, arrived time.Time, id []byte) (k, v []byte) {
	var from [8]byte
	binary.BigEndian.PutUint64(from[:], uint64(arrived.UnixNano()))
	n := 0
	for k, v = c.Seek(from[:]); k != nil && n < maxScan; k, v = c.Next() {
		if bytes.Equal(idOf(v), id) {
			return k, v
		}
		n++
	}
	return nil, nil
}

// idOf reads the request id a record's JSON starts with.
func idOf(v []byte) []byte {
	rest, ok := bytes.CutPrefix(v, []byte(`{"id":"`))
	if !ok {
		return nil
	}
	if i := bytes.IndexByte(rest, '"'); i > 0 {
		return rest[:i]
	}
	return nil
}

// Page reads a page: newest first from f.Before (or the end), or oldest
// first after f.After.
func (b *Bolt) Page(_ context.Context, f Filter) (llmapi.RequestPage, error) {
	p := NewPager(f)
	from, err := cursorKey(f.Before + f.After)
	if err != nil {
		return p.Page(), err
	}
	err = b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRecords).Cursor()
		if f.After != "" {
			k, v := c.Seek(from)
			if k != nil && bytes.Equal(k, from) {
				k, v = c.Next()
			}
			for ; k != nil && p.Add(hex.EncodeToString(k), v); k, v = c.Next() {
			}
			return nil
		}
		k, v := c.Last()
		if from != nil {
			if k, v = c.Seek(from); k == nil {
				k, v = c.Last()
			}
			for k != nil && bytes.Compare(k, from) >= 0 {
				k, v = c.Prev()
			}
		}
		for ; k != nil && p.Add(hex.EncodeToString(k), v); k, v = c.Prev() {
		}
		return nil
	})
	return p.Page(), err
}

// cursorKey reads a cursor this store gave; "" is none.
func cursorKey(c string) ([]byte, error) {
	if c == "" {
		return nil, nil
	}
	k, err := hex.DecodeString(c)
	if err != nil || len(k) != 16 {
		return nil, fmt.Errorf("%w: %q", ErrCursor, c)
	}
	return k, nil
}

// Get reads a record by request id.
func (b *Bolt) Get(_ context.Context, id string) (llmapi.RequestDetail, error) {
	var d llmapi.RequestDetail
	arrived, ok := arrival(id)
	if !ok {
		return d, ErrNotFound
	}
	err := b.db.View(func(tx *bolt.Tx) error {
		k, v := findFrom(tx.Bucket(bucketRecords).Cursor(), arrived, []byte(id))
		if k == nil {
			return ErrNotFound
		}
		var rec llmapi.RequestRecord
		if err := Decode(v, &rec); err != nil {
			return err
		}
		var bodies *Bodies
		if bv := tx.Bucket(bucketBodies).Get(k); bv != nil {
			bodies = new(Bodies)
			_ = json.Unmarshal(bv, bodies)
		}
		d = Detail(rec, bodies)
		return nil
	})
	return d, err
}
