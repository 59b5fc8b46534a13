package llmcache

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/llmgw/llmgw/modules/openai"
)

// A stored entry is one string, its blob, and nothing else: a header of
// fixed size (the numbers the store and the built-in matcher's cheap
// bounds read), then its key, question, bucket, scope, model and vector,
// then its question's analysis and its answer in a compact encoding
// (lengths as uvarints, strings as their bytes, word hashes as 8 bytes
// each). A store of 100k questions is marked by every garbage
// collection, and marking costs by the objects it reaches and the
// pointers it follows: an entry holding its analysis and answer as Go
// values had about forty pointers, an entry of Go fields beside its blob
// two objects and a handful; a blob is one object the collector marks
// without scanning it (BenchmarkGCMark: about half the collector's work
// of the latter). The rest is decoded when a candidate passes the cheap
// bounds (rare on a miss) or when the answer is served, from a view of
// the blob (viewOf): the blob never changes, so a view is read after the
// store's lock is released.

type blobWriter struct{ b []byte }

// blobBuffers are reused to encode blobs, which are then copied into a
// string of their exact size.
var blobBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func (w *blobWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *blobWriter) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *blobWriter) strs(ss []string) {
	w.uint(uint64(len(ss)))
	for _, s := range ss {
		w.str(s)
	}
}

type blobReader struct {
	s   string
	at  int
	bad bool
}

func (r *blobReader) uint() uint64 {
	n := 0
	var x uint64
	for shift := uint(0); r.at+n < len(r.s); shift += 7 {
		c := r.s[r.at+n]
		n++
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			r.at += n
			return x
		}
		if shift > 56 {
			break
		}
	}
	r.bad = true
	r.at = len(r.s)
	return 0
}

// str returns the next string, a part of the blob (no copy).
func (r *blobReader) str() string {
	n := int(r.uint())
	if n < 0 || n > len(r.s)-r.at {
		r.bad, r.at = true, len(r.s)
		return ""
	}
	s := r.s[r.at : r.at+n]
	r.at += n
	return s
}

func (r *blobReader) strs() []string {
	n := int(r.uint())
	if n == 0 || n > len(r.s)-r.at {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.str()
	}
	return out
}

// appendAnalysis encodes a (its set left out: a kept entry's is nil). The
// word hashes come first, so that the index's keys are read without
// decoding the rest (appendSetKeys).
func appendAnalysis(w *blobWriter, a *analysis) {
	w.uint(uint64(len(a.wh)))
	for _, h := range a.wh {
		w.b = binary.LittleEndian.AppendUint64(w.b, h)
	}
	w.strs(a.words)
	w.strs(a.numbers)
	w.strs(a.names)
	w.str(a.qtype)
	w.uint(uint64(len(a.orders)))
	for _, o := range a.orders {
		w.str(o[0])
		w.str(o[1])
	}
}

// readAnalysis decodes an analysis; nset, neg, sig and sum come from the
// entry.
func readAnalysis(r *blobReader, e *entry) *analysis {
	a := &analysis{nset: int(e.nset), neg: int(e.neg), sig: e.sig, sum: e.sum}
	if wh := wordHashes(r); len(wh) > 0 {
		if n := len(wh) / 8; n <= len(a.whInline) {
			a.wh = a.whInline[:n]
		} else {
			a.wh = make([]uint64, n)
		}
		for i := range a.wh {
			a.wh[i] = le64(wh[8*i:])
		}
	}
	a.words, a.numbers, a.names = r.strs(), r.strs(), r.strs()
	a.qtype = r.str()
	if n := int(r.uint()); n > 0 && n <= len(r.s)-r.at {
		a.orders = make([][2]string, n)
		for i := range a.orders {
			a.orders[i] = [2]string{r.str(), r.str()}
		}
	}
	return a
}

// wordHashes reads an encoded analysis's word hashes, 8 bytes each (no
// copy), leaving r at the rest of it.
func wordHashes(r *blobReader) string {
	n := int(r.uint())
	if n <= 0 || 8*n > len(r.s)-r.at {
		return ""
	}
	wh := r.s[r.at : r.at+8*n]
	r.at += 8 * n
	return wh
}

func appendAnswer(w *blobWriter, a *answer) {
	chat := uint64(0)
	if a.Chat {
		chat = 1
	}
	w.uint(chat)
	w.str(a.Model)
	w.uint(uint64(a.Usage.PromptTokens))
	w.uint(uint64(a.Usage.CompletionTokens))
	w.uint(uint64(a.Usage.TotalTokens))
	w.uint(uint64(a.ReasoningTokens))
	w.uint(uint64(len(a.Choices)))
	for _, c := range a.Choices {
		w.uint(uint64(c.Index))
		w.str(c.Content)
		w.str(c.FinishReason)
		w.uint(uint64(len(c.ToolCalls)))
		for _, t := range c.ToolCalls {
			w.str(t.ID)
			w.str(t.Name)
			w.str(t.Arguments)
		}
		w.str(c.Reasoning)
		w.str(string(c.Logprobs))
		w.str(string(c.StopReason))
	}
}

func readAnswer(r *blobReader) *answer {
	a := &answer{Chat: r.uint() == 1, Model: r.str()}
	a.Usage = openai.Usage{PromptTokens: int64(r.uint()), CompletionTokens: int64(r.uint()), TotalTokens: int64(r.uint())}
	a.ReasoningTokens = int64(r.uint())
	n := int(r.uint())
	if n > len(r.s)-r.at {
		return a
	}
	a.Choices = a.choicesFor(n)[:n]
	for i := range a.Choices {
		c := &a.Choices[i]
		c.Index, c.Content, c.FinishReason = int(r.uint()), r.str(), r.str()
		if m := int(r.uint()); m > 0 && m <= len(r.s)-r.at {
			c.ToolCalls = make([]toolCall, m)
			for j := range c.ToolCalls {
				c.ToolCalls[j] = toolCall{ID: r.str(), Name: r.str(), Arguments: r.str()}
			}
		}
		c.Reasoning, c.Logprobs, c.StopReason = r.str(), rawOf(r.str()), rawOf(r.str())
	}
	return a
}

// rawOf is a kept JSON value read back: nil for none. It shares the
// blob's memory, which never changes; what reads it only reads it.
func rawOf(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// The blob's header: where each number is.
const (
	hdrID      = 0  // uint64: entryID of the key
	hdrSig     = 8  // uint64: the analysis's word signature
	hdrSum     = 16 // uint64: the analysis's sum of word hashes
	hdrExpires = 24 // int64: Unix nanoseconds
	hdrSize    = 32 // int64: its cost in bytes
	hdrNset    = 40 // int32 each: the analysis's set size, negations, numbers
	hdrNeg     = 44
	hdrNnum    = 48
	hdrFlags   = 52 // uint32: flagAnalysed
	hdrLens    = 56 // uint32 each: the lengths of key, question, bucket, scope, model, vector
	hdrAnAt    = 80 // uint32: where the analysis starts
	hdrAnsAt   = 84 // uint32: where the answer starts
	hdrBytes   = 88

	flagAnalysed = 1
)

// freeze packs what a stored entry keeps into its blob and drops the
// analysis and answer it was put with (the request may still hold them;
// they are not changed). s.mu need not be held, as the entry is not yet
// shared.
func (e *entry) freeze() {
	buf := blobBuffers.Get().(*[]byte)
	w := blobWriter{b: append((*buf)[:0], make([]byte, hdrBytes)...)}
	parts := [...]string{e.key, e.question, e.bucket, e.scope, e.model}
	for i, p := range parts {
		binary.LittleEndian.PutUint32(w.b[hdrLens+4*i:], uint32(len(p)))
		w.b = append(w.b, p...)
	}
	binary.LittleEndian.PutUint32(w.b[hdrLens+4*partVec:], uint32(len(e.vec)))
	for _, v := range e.vec {
		w.b = append(w.b, byte(v))
	}
	if a := e.an; a != nil {
		e.analysed = true
		e.nset, e.neg, e.nnum = int32(a.nset), int32(a.neg), int32(len(a.numbers))
		e.sig, e.sum = a.sig, a.sum
		e.anAt = uint32(len(w.b))
		appendAnalysis(&w, a)
	}
	e.ansAt = uint32(len(w.b))
	if e.ans != nil {
		appendAnswer(&w, e.ans)
	}
	e.id = entryID(e.key)
	h := w.b[:hdrBytes]
	binary.LittleEndian.PutUint64(h[hdrID:], uint64(e.id))
	binary.LittleEndian.PutUint64(h[hdrSig:], e.sig)
	binary.LittleEndian.PutUint64(h[hdrSum:], e.sum)
	binary.LittleEndian.PutUint64(h[hdrExpires:], uint64(e.expires.UnixNano()))
	binary.LittleEndian.PutUint64(h[hdrSize:], uint64(e.size))
	binary.LittleEndian.PutUint32(h[hdrNset:], uint32(e.nset))
	binary.LittleEndian.PutUint32(h[hdrNeg:], uint32(e.neg))
	binary.LittleEndian.PutUint32(h[hdrNnum:], uint32(e.nnum))
	if e.analysed {
		binary.LittleEndian.PutUint32(h[hdrFlags:], flagAnalysed)
	}
	binary.LittleEndian.PutUint32(h[hdrAnAt:], e.anAt)
	binary.LittleEndian.PutUint32(h[hdrAnsAt:], e.ansAt)
	// One string, of exactly its size: the blob lives as long as the entry.
	var b strings.Builder
	b.Grow(len(w.b))
	b.Write(w.b)
	blob := b.String()
	if cap(w.b) <= 64<<10 {
		*buf = w.b
		blobBuffers.Put(buf)
	}
	// The entry's strings and vector are parts of its blob from now on.
	*e = viewOf(blob)
}

// viewOf is the entry a blob holds, frozen: its strings and vector are
// parts of the blob (no copy).
func viewOf(blob string) entry {
	e := entry{blob: blob, frozen: true}
	e.id = setKey(le64(blob[hdrID:]))
	e.sig, e.sum = le64(blob[hdrSig:]), le64(blob[hdrSum:])
	e.expires = time.Unix(0, int64(le64(blob[hdrExpires:])))
	e.size = int64(le64(blob[hdrSize:]))
	e.nset, e.neg, e.nnum = int32(le32(blob[hdrNset:])), int32(le32(blob[hdrNeg:])), int32(le32(blob[hdrNnum:]))
	e.analysed = le32(blob[hdrFlags:])&flagAnalysed != 0
	e.anAt, e.ansAt = le32(blob[hdrAnAt:]), le32(blob[hdrAnsAt:])
	at := hdrBytes
	var parts [5]string
	for i := range parts {
		parts[i], at = blobPart(blob, i, at)
	}
	e.key, e.question, e.bucket, e.scope, e.model = parts[0], parts[1], parts[2], parts[3], parts[4]
	if n := int(le32(blob[hdrLens+4*partVec:])); n > 0 {
		e.vec = unsafe.Slice((*int8)(unsafe.Pointer(unsafe.StringData(blob[at:]))), n)
	}
	return e
}

// Header fields read without making a view, for the store's bookkeeping
// and the matcher's cheap bounds.

func blobID(b string) setKey { return setKey(le64(b[hdrID:])) }

func blobSize(b string) int64 { return int64(le64(b[hdrSize:])) }

func blobExpires(b string) int64 { return int64(le64(b[hdrExpires:])) }

func blobAnalysed(b string) bool { return le32(b[hdrFlags:])&flagAnalysed != 0 }

// blobSetSum is the sum of the hashes of the entry's set of words, 0 for
// an entry whose question was not analysed.
func blobSetSum(b string) uint64 { return le64(b[hdrSum:]) }

// blobBoundsMatch reports whether an entry's analysis has a's set size,
// negations and numbers, and a word signature at most one word apart
// each way: the built-in matcher's cheap bounds.
func blobBoundsMatch(b string, a *analysis) bool {
	return int(int32(le32(b[hdrNset:]))) == a.nset && int(int32(le32(b[hdrNeg:]))) == a.neg &&
		int(int32(le32(b[hdrNnum:]))) == len(a.numbers) && bits.OnesCount64(le64(b[hdrSig:])^a.sig) <= 2
}

// The parts after a blob's header, in order; the header's lengths hold
// each one's length at hdrLens+4*part.
const (
	partKey = iota
	partQuestion
	partBucket
	partScope
	partModel
	partVec
)

// blobPart returns the blob's part i, which starts at at, and where the
// next one starts.
func blobPart(b string, i, at int) (string, int) {
	n := int(le32(b[hdrLens+4*i:]))
	return b[at : at+n], at + n
}

// blobNth returns the blob's part i.
func blobNth(b string, i int) string {
	at := hdrBytes
	for j := range i {
		at += int(le32(b[hdrLens+4*j:]))
	}
	s, _ := blobPart(b, i, at)
	return s
}

// blobKey is the entry's exact key.
func blobKey(b string) string { return blobNth(b, partKey) }

// blobBucket is the entry's bucket.
func blobBucket(b string) string { return blobNth(b, partBucket) }

// analysis returns the entry's question analysed: decoded from a stored
// entry's blob, or what it was made with. nil when it has none.
func (e *entry) analysis() *analysis {
	if !e.frozen {
		return e.an
	}
	if !e.analysed {
		return nil
	}
	return readAnalysis(&blobReader{s: e.blob, at: int(e.anAt)}, e)
}

// answer returns the entry's answer: decoded from a stored entry's blob,
// or what it was made with.
func (e *entry) answer() *answer {
	if !e.frozen {
		return e.ans
	}
	return readAnswer(&blobReader{s: e.blob, at: int(e.ansAt)})
}

// hasAnalysis reports whether the entry's question was analysed (it is
// in the built-in matcher's or the vector index).
func (e *entry) hasAnalysis() bool {
	if e.frozen {
		return e.analysed
	}
	return e.an != nil
}

// appendSetKeys appends the entry's keys in the built-in matcher's index.
func (e *entry) appendSetKeys(dst []setKey) []setKey {
	if !e.frozen {
		return e.an.appendSetKeys(dst, e.bucket)
	}
	wh := wordHashes(&blobReader{s: e.blob, at: int(e.anAt)})
	return appendSetKeysOf(dst, e.bucket, e.sum, len(wh)/8, func(i int) uint64 {
		return le64(wh[8*i:])
	})
}

// le32 reads a little-endian uint32 from the start of s.
func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// le64 reads a little-endian uint64 from the start of s.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
