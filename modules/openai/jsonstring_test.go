package openai

import (
	"encoding/json"
	"testing"
)

func TestAppendJSONString(t *testing.T) {
	for in, want := range map[string]string{
		"plain é 東京":          `"plain é 東京"`,
		"q\"b\\n\n\r\t\x01":   `"q\"b\\n\n\r\t\u0001"`,
		"bad \xff byte":       `"bad \ufffd byte"`,
		"ls \u2028 ps \u2029": `"ls \u2028 ps \u2029"`,
	} {
		if got := string(AppendJSONString(nil, in)); got != want {
			t.Errorf("string %q: %s, want %s", in, got, want)
		}
		if got := string(AppendJSONString(nil, []byte(in))); got != want {
			t.Errorf("bytes %q: %s, want %s", in, got, want)
		}
		var back string
		if err := json.Unmarshal([]byte(want), &back); err != nil {
			t.Errorf("%s does not decode: %v", want, err)
		}
	}
	src, dst := []byte("東京 \u2028 and \"quotes\""), make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() { dst = AppendJSONString(dst[:0], src) }); n != 0 {
		t.Errorf("%v allocations appending bytes into room enough", n)
	}
}
