package tinygguf

import (
	"os"
	"path/filepath"
	"testing"

	gguf "github.com/gpustack/gguf-parser-go"
)

func TestWriteParses(t *testing.T) {
	c := Default()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := WriteFile(path, c); err != nil {
		t.Fatal(err)
	}
	gf, err := gguf.ParseGGUFFile(path)
	if err != nil {
		t.Fatalf("parsing the file: %v", err)
	}
	if gf.Header.Version != 3 {
		t.Errorf("version %d, want 3", gf.Header.Version)
	}
	a := gf.Architecture()
	if a.Architecture != "llama" || a.EmbeddingLength != uint64(c.Embd) || a.BlockCount != uint64(c.Blocks) ||
		a.MaximumContextLength != uint64(c.Context) || a.AttentionLayerNormRMSEpsilon != 1e-5 {
		t.Errorf("architecture: %+v", a)
	}
	tokens, _, _, _ := c.vocab()
	tk := gf.Tokenizer()
	if tk.Model != "llama" || tk.TokensLength != uint64(len(tokens)) || tk.BOSTokenID != 1 || tk.EOSTokenID != 2 || tk.UnknownTokenID != 0 {
		t.Errorf("tokenizer: %+v", tk)
	}
	if want := 3 + 9*c.Blocks; len(gf.TensorInfos) != want {
		t.Errorf("%d tensors, want %d", len(gf.TensorInfos), want)
	}
	for _, ti := range gf.TensorInfos {
		if ti.Offset%alignment != 0 {
			t.Errorf("tensor %s at offset %d is not aligned", ti.Name, ti.Offset)
		}
	}
	if gf.TensorDataStartOffset%alignment != 0 {
		t.Errorf("data section at %d is not aligned", gf.TensorDataStartOffset)
	}
	// The file ends where the last tensor's data does.
	st, _ := os.Stat(path)
	last := gf.TensorInfos[len(gf.TensorInfos)-1]
	end := gf.TensorDataStartOffset + int64(last.Offset) + int64(4*elements(last.Dimensions))
	if st.Size() != end {
		t.Errorf("file is %d bytes, tensors end at %d", st.Size(), end)
	}
	if st.Size() > 2<<20 {
		t.Errorf("the default model is %d bytes; it should be tiny", st.Size())
	}
}

func TestDeterministicAndUnique(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	if err := WriteFile(a, Default()); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(b, Default()); err != nil {
		t.Fatal(err)
	}
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if string(x) != string(y) {
		t.Error("the same config wrote different files")
	}
	tokens, types, _, word := Default().vocab()
	seen := map[string]bool{}
	words := 0
	for i, tok := range tokens {
		if seen[tok] {
			t.Errorf("token %q twice", tok)
		}
		seen[tok] = true
		if word[i] {
			words++
			if types[i] != tokNormal {
				t.Errorf("word %q has type %d", tok, types[i])
			}
		}
	}
	if !seen["<0x0A>"] || !seen["▁the"] || !seen["▁"] || words < 50 {
		t.Errorf("vocabulary lacks byte tokens, words or the space piece (%d words)", words)
	}
}

func elements(dims []uint64) uint64 {
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}
