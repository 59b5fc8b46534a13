package llmguard

import (
	"strconv"
	"strings"
)

// vault holds one request's redacted values and their placeholders: the
// same value always gets the same placeholder (<EMAIL_1>), and the answer
// gets the values back.
type vault struct {
	byValue map[string]string // value → placeholder
	values  map[string]string // placeholder → value
	counts  map[string]int    // per kind
	maxLen  int               // longest placeholder
	tag     string            // before the number: "T" for tool results' (<EMAIL_T1>)
}

func (v *vault) empty() bool { return v == nil || len(v.values) == 0 }

// placeholder returns the placeholder for a value of a kind.
func (v *vault) placeholder(kind, value string) string {
	if v.byValue == nil {
		v.byValue, v.values, v.counts = map[string]string{}, map[string]string{}, map[string]int{}
	}
	if p, ok := v.byValue[value]; ok {
		return p
	}
	v.counts[kind]++
	p := "<" + kind + "_" + v.tag + strconv.Itoa(v.counts[kind]) + ">"
	v.byValue[value], v.values[p] = p, value
	v.maxLen = max(v.maxLen, len(p))
	return p
}

func isPlaceholderChar(c byte) bool { return isUpper(c) || isDigit(c) || c == '_' }

// restore puts values back into text. Unless final, a tail that may be
// the start of a placeholder is held back and returned as rest: at most
// the longest placeholder's length, and only when some placeholder starts
// with it.
func (v *vault) restore(text string, final bool) (out, rest string) {
	if v.empty() || strings.IndexByte(text, '<') < 0 {
		return text, ""
	}
	var b strings.Builder
	at := 0
	for i := 0; i < len(text); {
		j := strings.IndexByte(text[i:], '<')
		if j < 0 {
			break
		}
		j += i
		k := j + 1
		for k < len(text) && isPlaceholderChar(text[k]) {
			k++
		}
		if k == len(text) {
			if !final && len(text)-j < v.maxLen && v.isPrefix(text[j:]) {
				b.WriteString(text[at:j])
				return b.String(), text[j:]
			}
			break
		}
		if text[k] == '>' {
			if val, ok := v.values[text[j:k+1]]; ok {
				b.WriteString(text[at:j])
				b.WriteString(val)
				at = k + 1
				i = k + 1
				continue
			}
		}
		i = j + 1
	}
	if at == 0 {
		return text, ""
	}
	b.WriteString(text[at:])
	return b.String(), ""
}

// isPrefix reports whether some placeholder starts with s.
func (v *vault) isPrefix(s string) bool {
	for p := range v.values {
		if strings.HasPrefix(p, s) {
			return true
		}
	}
	return false
}

// redact replaces the findings' spans in texts (findings resolved: in
// order, not overlapping) with their replacement or a placeholder of this
// vault, and calls set with each changed text's index and new text.
func (v *vault) redact(texts []string, findings []Finding, set func(ti int, text string)) {
	for i := 0; i < len(findings); {
		ti := findings[i].Text
		if ti < 0 {
			i++
			continue
		}
		text := texts[ti]
		var b strings.Builder
		at := 0
		for ; i < len(findings) && findings[i].Text == ti; i++ {
			f := findings[i]
			b.WriteString(text[at:f.Start])
			if f.Replacement != "" || f.Kind == "" {
				b.WriteString(f.Replacement)
			} else {
				b.WriteString(v.placeholder(f.Kind, text[f.Start:f.End]))
			}
			at = f.End
		}
		b.WriteString(text[at:])
		set(ti, b.String())
	}
}
