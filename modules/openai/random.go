package openai

import (
	"encoding/binary"
	"math/rand/v2"
)

// FillRandom fills b from the runtime's generator (ChaCha8, seeded by
// the system): unpredictable enough for ids, which guard nothing (a
// stored response is visible only to its key), and without the system
// call crypto/rand makes per id.
func FillRandom(b []byte) {
	for i := 0; i < len(b); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rand.Uint64())
		copy(b[i:], w[:])
	}
}
