package mirror

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// TestPipeCopy checks that what is written and what is hashed are the
// source's bytes, in order, whatever the size against the buffers.
func TestPipeCopy(t *testing.T) {
	for _, n := range []int{0, 1, 1 << 20, 1<<20 + 1, 7<<20 + 12345} {
		src := make([]byte, n)
		r := rand.NewChaCha8([32]byte{byte(n)})
		_, _ = r.Read(src)
		var out bytes.Buffer
		h := sha256.New()
		got, err := pipeCopy(context.Background(), &out, h, &Transfer{}, bytes.NewReader(src))
		if err != nil || got != int64(n) {
			t.Fatalf("%d bytes: copied %d, %v", n, got, err)
		}
		want := sha256.Sum256(src)
		if !bytes.Equal(out.Bytes(), src) || !bytes.Equal(h.Sum(nil), want[:]) {
			t.Fatalf("%d bytes: the copy or its sum differs from the source", n)
		}
	}
}

type failingWriter struct{ left int }

func (w *failingWriter) Write(b []byte) (int, error) {
	if w.left < len(b) {
		n := w.left
		w.left = 0
		return n, errors.New("disk full")
	}
	w.left -= len(b)
	return len(b), nil
}

type failingReader struct {
	r    io.Reader
	left int
}

func (f *failingReader) Read(b []byte) (int, error) {
	if f.left == 0 {
		return 0, errors.New("connection reset")
	}
	n, err := f.r.Read(b[:min(len(b), f.left)])
	f.left -= n
	return n, err
}

// TestPipeCopyErrors checks that a failing write or read ends the copy
// with its error, and nothing hangs.
func TestPipeCopyErrors(t *testing.T) {
	src := make([]byte, 20<<20)
	n, err := pipeCopy(context.Background(), &failingWriter{left: 3<<20 + 5}, sha256.New(), &Transfer{}, bytes.NewReader(src))
	if err == nil || err.Error() != "disk full" || n != 3<<20+5 {
		t.Errorf("failing write: %d bytes, %v", n, err)
	}
	var out bytes.Buffer
	n, err = pipeCopy(context.Background(), &out, sha256.New(), &Transfer{}, &failingReader{r: bytes.NewReader(src), left: 5<<20 + 7})
	if err == nil || err.Error() != "connection reset" || n != 5<<20+7 {
		t.Errorf("failing read: %d bytes, %v", n, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pipeCopy(ctx, &out, sha256.New(), &Transfer{}, bytes.NewReader(src)); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}
