// Package tinygguf writes a tiny llama-architecture model as a GGUF v3
// file, for tests of engines that load GGUF (llama.cpp, Ollama): random
// but deterministic F32 weights and a small SentencePiece-style
// vocabulary of byte tokens, printable characters and whole words with
// every prefix. One embedding dimension is constant, so a column of the
// output matrix biases tokens directly: control, byte, character and
// prefix tokens are suppressed and the model emits whole words (and stops
// after a few when StopBias is positive). It is a test helper, not part
// of the llmgw binary.
package tinygguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
)

// Config sizes the model.
type Config struct {
	Blocks, Embd, Heads, FFN, Context int
	Seed                              uint64
	// Words are the whole words of the vocabulary. Default: a few dozen
	// common English words.
	Words []string
	// StopBias is the end-of-sequence token's bias: 0 never stops (every
	// answer is max_tokens long); about 2 stops after a few words.
	StopBias float32
}

// Default is the size that loads in a fraction of a second and generates
// hundreds of tokens per second on one core: 2 blocks, 64 wide, 4 heads.
func Default() Config {
	return Config{Blocks: 2, Embd: 64, Heads: 4, FFN: 128, Context: 2048, Seed: 1}
}

var defaultWords = strings.Fields(`the a an and of to in is it that for on with as was at by be this are
from or have not but what all were when we there can your which their said if do will each about how
up out them then she many some so these would other into has more her two like him see time could no
make than first been its who now people my made over did down only way find use may water long little
very after words called just where most know sea river mountain light stone cloud wind`)

// GGUF value types.
const (
	tUint32  = 4
	tInt32   = 5
	tFloat32 = 6
	tBool    = 7
	tString  = 8
	tArray   = 9
)

// Token types.
const (
	tokNormal  = 1
	tokUnknown = 2
	tokControl = 3
	tokByte    = 6
)

const alignment = 32

type tensor struct {
	name string
	dims []uint64 // row length first
	data []float32
}

// Vocab returns the token strings, types and scores, and which tokens are
// whole words.
func (c Config) vocab() (tokens []string, types []int32, scores []float32, word []bool) {
	add := func(s string, typ int32, isWord bool) {
		tokens = append(tokens, s)
		types = append(types, typ)
		scores = append(scores, float32(len([]rune(s))))
		word = append(word, isWord)
	}
	add("<unk>", tokUnknown, false)
	add("<s>", tokControl, false)
	add("</s>", tokControl, false)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), tokByte, false)
	}
	seen := map[string]bool{}
	for _, t := range tokens {
		seen[t] = true
	}
	addOnce := func(s string, isWord bool) {
		if seen[s] {
			if isWord { // a prefix of an earlier word that is a word itself
				for i := range tokens {
					if tokens[i] == s {
						word[i] = true
					}
				}
			}
			return
		}
		seen[s] = true
		add(s, tokNormal, isWord)
	}
	addOnce("▁", false)
	for ch := byte(0x21); ch < 0x7f; ch++ {
		addOnce(string(ch), false)
	}
	words := c.Words
	if len(words) == 0 {
		words = defaultWords
	}
	for _, w := range words {
		p := "▁" + w
		for i := len("▁") + 1; i < len(p); i++ {
			addOnce(p[:i], false)
		}
		addOnce(p, true)
	}
	return tokens, types, scores, word
}

// Write writes the model.
func Write(w io.Writer, c Config) error {
	if c.Embd%c.Heads != 0 {
		return fmt.Errorf("embd %d is not a multiple of heads %d", c.Embd, c.Heads)
	}
	tokens, types, scores, word := c.vocab()
	vocab := len(tokens)
	rng := rand.New(rand.NewPCG(c.Seed, 0x6767))
	random := func(n int, scale float32) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64()) * scale
		}
		return out
	}
	ones := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}
	e, f := c.Embd, c.FFN
	embd := random(e*vocab, 0.05)
	out := random(e*vocab, 0.05)
	for t := 0; t < vocab; t++ {
		embd[t*e] = 1 // the constant dimension
		switch {
		case t == 2 && c.StopBias != 0:
			out[t*e] = c.StopBias
		case word[t]:
			out[t*e] = 0
		default:
			out[t*e] = -20 // never emitted
		}
	}
	ts := []tensor{
		{"token_embd.weight", []uint64{uint64(e), uint64(vocab)}, embd},
		{"output_norm.weight", []uint64{uint64(e)}, ones(e)},
		{"output.weight", []uint64{uint64(e), uint64(vocab)}, out},
	}
	for b := 0; b < c.Blocks; b++ {
		p := fmt.Sprintf("blk.%d.", b)
		ts = append(ts,
			tensor{p + "attn_norm.weight", []uint64{uint64(e)}, ones(e)},
			tensor{p + "attn_q.weight", []uint64{uint64(e), uint64(e)}, random(e*e, 0.02)},
			tensor{p + "attn_k.weight", []uint64{uint64(e), uint64(e)}, random(e*e, 0.02)},
			tensor{p + "attn_v.weight", []uint64{uint64(e), uint64(e)}, random(e*e, 0.02)},
			tensor{p + "attn_output.weight", []uint64{uint64(e), uint64(e)}, random(e*e, 0.02)},
			tensor{p + "ffn_norm.weight", []uint64{uint64(e)}, ones(e)},
			tensor{p + "ffn_gate.weight", []uint64{uint64(e), uint64(f)}, random(e*f, 0.02)},
			tensor{p + "ffn_up.weight", []uint64{uint64(e), uint64(f)}, random(e*f, 0.02)},
			tensor{p + "ffn_down.weight", []uint64{uint64(f), uint64(e)}, random(f*e, 0.02)},
		)
	}

	g := &gw{}
	u32 := func(v uint32) func() { return func() { g.u32(tUint32); g.u32(v) } }
	meta := []kv{
		{"general.architecture", func() { g.u32(tString); g.str("llama") }},
		{"general.name", func() { g.u32(tString); g.str("llmgw-tiny") }},
		{"general.file_type", u32(0)},
		{"general.alignment", u32(alignment)},
		{"llama.context_length", u32(uint32(c.Context))},
		{"llama.embedding_length", u32(uint32(e))},
		{"llama.block_count", u32(uint32(c.Blocks))},
		{"llama.feed_forward_length", u32(uint32(f))},
		{"llama.attention.head_count", u32(uint32(c.Heads))},
		{"llama.attention.head_count_kv", u32(uint32(c.Heads))},
		{"llama.rope.dimension_count", u32(uint32(e / c.Heads))},
		{"llama.attention.layer_norm_rms_epsilon", func() { g.u32(tFloat32); g.f32(1e-5) }},
		{"llama.rope.freq_base", func() { g.u32(tFloat32); g.f32(10000) }},
		{"tokenizer.ggml.model", func() { g.u32(tString); g.str("llama") }},
		{"tokenizer.ggml.tokens", func() {
			g.u32(tArray)
			g.u32(tString)
			g.u64(uint64(len(tokens)))
			for _, t := range tokens {
				g.str(t)
			}
		}},
		{"tokenizer.ggml.scores", func() {
			g.u32(tArray)
			g.u32(tFloat32)
			g.u64(uint64(len(scores)))
			for _, s := range scores {
				g.f32(s)
			}
		}},
		{"tokenizer.ggml.token_type", func() {
			g.u32(tArray)
			g.u32(tInt32)
			g.u64(uint64(len(types)))
			for _, t := range types {
				g.u32(uint32(t))
			}
		}},
		{"tokenizer.ggml.unknown_token_id", u32(0)},
		{"tokenizer.ggml.bos_token_id", u32(1)},
		{"tokenizer.ggml.eos_token_id", u32(2)},
		{"tokenizer.ggml.add_bos_token", func() { g.u32(tBool); g.u8(1) }},
		{"tokenizer.ggml.add_eos_token", func() { g.u32(tBool); g.u8(0) }},
	}
	return encode(w, g, meta, ts)
}

type kv struct {
	key string
	put func()
}

// encode writes a GGUF v3 file of meta and ts; meta's put functions write
// through g.
func encode(w io.Writer, g *gw, meta []kv, ts []tensor) error {
	bw := bufio.NewWriter(w)
	g.w = bw
	g.raw([]byte("GGUF"))
	g.u32(3)
	g.u64(uint64(len(ts)))
	g.u64(uint64(len(meta)))
	for _, m := range meta {
		g.str(m.key)
		m.put()
	}
	offset := uint64(0)
	for _, t := range ts {
		g.str(t.name)
		g.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			g.u64(d)
		}
		g.u32(0) // F32
		g.u64(offset)
		offset += pad(uint64(4 * len(t.data)))
	}
	g.zeros(pad(g.n) - g.n)
	for _, t := range ts {
		start := g.n
		for _, v := range t.data {
			g.f32(v)
		}
		g.zeros(pad(g.n-start) - (g.n - start))
	}
	if g.err != nil {
		return g.err
	}
	return bw.Flush()
}

// WriteFile writes the model to path.
func WriteFile(path string, c Config) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, c); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func pad(n uint64) uint64 { return (n + alignment - 1) / alignment * alignment }

// gw writes little-endian values, counting bytes and keeping the first
// error.
type gw struct {
	w   io.Writer
	n   uint64
	err error
	buf [8]byte
}

func (g *gw) raw(b []byte) {
	if g.err != nil {
		return
	}
	_, g.err = g.w.Write(b)
	g.n += uint64(len(b))
}

func (g *gw) u8(v uint8) { g.raw([]byte{v}) }
func (g *gw) u32(v uint32) {
	binary.LittleEndian.PutUint32(g.buf[:4], v)
	g.raw(g.buf[:4])
}
func (g *gw) u64(v uint64) {
	binary.LittleEndian.PutUint64(g.buf[:8], v)
	g.raw(g.buf[:8])
}
func (g *gw) f32(v float32) { g.u32(math.Float32bits(v)) }
func (g *gw) str(s string) {
	g.u64(uint64(len(s)))
	g.raw([]byte(s))
}
func (g *gw) zeros(n uint64) {
	if n > 0 {
		g.raw(make([]byte, n))
	}
}

// Adapter configures a LoRA adapter for the model of a Config.
type Adapter struct {
	// Favour are the whole words of the model's vocabulary the adapter
	// makes likely: its answers are made of them, where the model's
	// answers are not.
	Favour []string
	// Bias is the favoured words' added bias (default 10: strong enough
	// that they win every step).
	Bias float32
}

// WriteAdapter writes a LoRA adapter for the model c describes, in
// llama.cpp's adapter format: general.type adapter, adapter.type lora,
// adapter.lora.alpha, and for output.weight a rank-1 pair
// output.weight.lora_a ([embd, 1]: it reads the constant embedding
// dimension) and output.weight.lora_b ([1, vocab]: the bias per token), so
// that the adapter adds Bias to the favoured words' logits.
func WriteAdapter(w io.Writer, c Config, a Adapter) error {
	tokens, _, _, word := c.vocab()
	bias := a.Bias
	if bias == 0 {
		bias = 10
	}
	favour := map[string]bool{}
	for _, f := range a.Favour {
		favour["▁"+f] = true
	}
	e, vocab := c.Embd, len(tokens)
	loraA := make([]float32, e)
	loraA[0] = 1 // the constant dimension
	loraB := make([]float32, vocab)
	found := 0
	for t, tok := range tokens {
		if word[t] && favour[tok] {
			loraB[t] = bias
			found++
		}
	}
	if found != len(favour) {
		return fmt.Errorf("tinygguf adapter: %d of the favoured words %q are words of the vocabulary", found, a.Favour)
	}
	g := &gw{}
	str := func(v string) func() { return func() { g.u32(tString); g.str(v) } }
	meta := []kv{
		{"general.architecture", str("llama")},
		{"general.type", str("adapter")},
		{"general.name", str("llmgw-tiny-lora")},
		{"general.alignment", func() { g.u32(tUint32); g.u32(alignment) }},
		{"adapter.type", str("lora")},
		{"adapter.lora.alpha", func() { g.u32(tFloat32); g.f32(1) }},
	}
	ts := []tensor{
		{"output.weight.lora_a", []uint64{uint64(e), 1}, loraA},
		{"output.weight.lora_b", []uint64{1, uint64(vocab)}, loraB},
	}
	return encode(w, g, meta, ts)
}

// WriteAdapterFile writes the adapter to path.
func WriteAdapterFile(path string, c Config, a Adapter) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteAdapter(f, c, a); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
