package llmguard

import (
	"math"
	"net/netip"
	"strings"
)

// A detection is one value a detector found in a text: bytes [Start, End).
type detection struct {
	Start, End int
	Kind       string
}

// Detector kinds, also the placeholder prefixes (<EMAIL_1>).
const (
	KindEmail      = "EMAIL"
	KindPhone      = "PHONE"
	KindCard       = "CARD"
	KindIBAN       = "IBAN"
	KindNationalID = "NATIONAL_ID"
	KindIP         = "IP"
	KindSecret     = "SECRET"
)

// detectors by their configuration name.
var detectors = map[string]func(s string, out []detection) []detection{
	"email":       detectEmails,
	"phone":       detectPhones,
	"card":        detectCards,
	"iban":        detectIBANs,
	"national_id": detectNationalIDs,
	"ip":          detectIPs,
	"secret":      detectSecrets,
}

// detectorOrder is the order detectors run in: most specific first, so
// that when spans overlap the more specific kind wins.
var detectorOrder = []string{"secret", "email", "iban", "card", "national_id", "ip", "phone"}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isAlnum(c byte) bool { return isDigit(c) || isUpper(c) || isLower(c) }

// wordBefore reports whether s[i-1] ends a word that would join s[i:].
func wordBefore(s string, i int) bool { return i > 0 && (isAlnum(s[i-1]) || s[i-1] == '_') }
func wordAfter(s string, i int) bool  { return i < len(s) && (isAlnum(s[i]) || s[i] == '_') }

// --- email ---

func isLocal(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'
}

func detectEmails(s string, out []detection) []detection {
	for off := 0; ; {
		at := strings.IndexByte(s[off:], '@')
		if at < 0 {
			return out
		}
		at += off
		off = at + 1
		start := at
		for start > 0 && isLocal(s[start-1]) {
			start--
		}
		for start < at && s[start] == '.' {
			start++
		}
		if start == at {
			continue
		}
		// domain: labels of letters, digits and hyphens, two or more,
		// the last (TLD) letters only and at least two long.
		end, labels, lastStart := at+1, 0, at+1
		for {
			i := end
			for i < len(s) && (isAlnum(s[i]) || s[i] == '-') {
				i++
			}
			if i == end {
				break
			}
			labels++
			lastStart, end = end, i
			if i+1 < len(s) && s[i] == '.' && isAlnum(s[i+1]) {
				end = i + 1
				continue
			}
			break
		}
		if labels < 2 {
			continue
		}
		tld := s[lastStart:end]
		if len(tld) < 2 || !allLetters(tld) {
			continue
		}
		out = append(out, detection{start, end, KindEmail})
		off = end
	}
}

func allLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isUpper(s[i]) && !isLower(s[i]) {
			return false
		}
	}
	return true
}

// --- numbers: cards, phones, national ids ---

// digitRun is a run of digits joined by single separators from seps.
// It returns the end of the run and the digits it holds.
func digitRun(s string, i int, seps string, buf []byte) (int, []byte) {
	buf = buf[:0]
	end := i
	for i < len(s) {
		c := s[i]
		switch {
		case isDigit(c):
			buf = append(buf, c)
			i++
			end = i
		case strings.IndexByte(seps, c) >= 0 && i+1 < len(s) && isDigit(s[i+1]) && len(buf) > 0:
			i++
		default:
			return end, buf
		}
	}
	return end, buf
}

func luhn(d []byte) bool {
	sum, double := 0, false
	for i := len(d) - 1; i >= 0; i-- {
		n := int(d[i] - '0')
		if double {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
		double = !double
	}
	return sum%10 == 0
}

// cardPrefix reports whether the number starts like a payment card of a
// major network with a matching length.
func cardPrefix(d []byte) bool {
	n := len(d)
	p2 := int(d[0]-'0')*10 + int(d[1]-'0')
	p4 := p2*100 + int(d[2]-'0')*10 + int(d[3]-'0')
	switch {
	case d[0] == '4': // Visa
		return n == 13 || n == 16 || n == 19
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720: // Mastercard
		return n == 16
	case p2 == 34 || p2 == 37: // Amex
		return n == 15
	case p4 == 6011 || p2 == 65 || (p4 >= 6440 && p4 <= 6499): // Discover
		return n >= 16 && n <= 19
	case p4 >= 3528 && p4 <= 3589: // JCB
		return n >= 16 && n <= 19
	case p2 == 36 || p2 == 38 || (p4 >= 3000 && p4 <= 3059): // Diners
		return n >= 14 && n <= 19
	case p2 == 62: // UnionPay
		return n >= 16 && n <= 19
	case p2 == 50 || (p2 >= 56 && p2 <= 69): // Maestro
		return n >= 12 && n <= 19
	}
	return false
}

func detectCards(s string, out []detection) []detection {
	var buf [32]byte
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) || wordBefore(s, i) {
			continue
		}
		end, d := digitRun(s, i, " -", buf[:0])
		if len(d) >= 12 && len(d) <= 19 && !wordAfter(s, end) && cardPrefix(d) && luhn(d) {
			out = append(out, detection{i, end, KindCard})
		}
		i = end
	}
	return out
}

// detectPhones finds international numbers (+ and 8 to 15 digits) and
// national ones written with separators: (555) 123-4567, 555-123-4567,
// 555.123.4567, 020 7946 0958, 06 12 34 56 78.
func detectPhones(s string, out []detection) []detection {
	var buf [32]byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '+' && c != '(' && !isDigit(c) {
			continue
		}
		start := i
		plus := false
		switch {
		case c == '+' && i+1 < len(s) && isDigit(s[i+1]) && !wordBefore(s, i):
			plus = true
			i++
		case c == '(' && i+1 < len(s) && isDigit(s[i+1]) && !wordBefore(s, i):
		case isDigit(c) && !wordBefore(s, i) && (i == 0 || (s[i-1] != '.' && s[i-1] != '-')):
		default:
			continue
		}
		end, digits, groups := phoneRun(s, i, buf[:0])
		i = max(end-1, i)
		if wordAfter(s, end) {
			continue
		}
		switch {
		case plus:
			if len(digits) >= 8 && len(digits) <= 15 {
				out = append(out, detection{start, end, KindPhone})
			}
		case groups >= 3 && len(digits) >= 10 && len(digits) <= 11:
			out = append(out, detection{start, end, KindPhone})
		}
	}
	return out
}

// phoneRun reads digits joined by phone separators (space, -, ., and one
// parenthesised group) and counts the groups.
func phoneRun(s string, i int, buf []byte) (end int, digits []byte, groups int) {
	digits = buf
	inGroup, paren := false, false
	sepKind := byte(0)
	end = i
	for i < len(s) {
		c := s[i]
		switch {
		case isDigit(c):
			if !inGroup {
				groups++
				inGroup = true
			}
			digits = append(digits, c)
			i++
			end = i
		case c == '(' && !paren && !inGroup:
			paren = true
			i++
		case c == ')' && paren && inGroup:
			paren = false
			inGroup = false
			i++
			if i < len(s) && s[i] == ' ' {
				i++
			}
		case (c == ' ' || c == '-' || c == '.') && inGroup && i+1 < len(s) && (isDigit(s[i+1]) || s[i+1] == '('):
			if sepKind == 0 {
				sepKind = c
			} else if c != sepKind && !(sepKind == ' ' || c == ' ') {
				return end, digits, groups
			}
			inGroup = false
			i++
		default:
			return end, digits, groups
		}
	}
	return end, digits, groups
}

// detectNationalIDs finds identity numbers that carry a check: Spanish
// DNI/NIE (check letter), Swedish personnummer (Luhn) and US social
// security numbers (format rules: no 000, 666 or 9xx area, no 00 group,
// no 0000 serial).
func detectNationalIDs(s string, out []detection) []detection {
	const dniLetters = "TRWAGMYFPDXBNJZSQVHLCKE"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (!isDigit(c) && c != 'X' && c != 'Y' && c != 'Z') || wordBefore(s, i) {
			continue
		}
		// NIE: X/Y/Z + 7 digits + letter.
		if (c == 'X' || c == 'Y' || c == 'Z') && i+9 <= len(s) && allDigits(s[i+1:i+8]) && isUpper(s[i+8]) && !wordAfter(s, i+9) {
			n := int(c-'X')*10000000 + atoi(s[i+1:i+8])
			if dniLetters[n%23] == s[i+8] {
				out = append(out, detection{i, i + 9, KindNationalID})
				i += 8
			}
			continue
		}
		if !isDigit(c) {
			continue
		}
		switch {
		case i+9 <= len(s) && allDigits(s[i:i+8]) && isUpper(s[i+8]) && !wordAfter(s, i+9): // DNI
			if dniLetters[atoi(s[i:i+8])%23] == s[i+8] {
				out = append(out, detection{i, i + 9, KindNationalID})
				i += 8
			}
		case i+11 <= len(s) && allDigits(s[i:i+3]) && s[i+3] == '-' && allDigits(s[i+4:i+6]) && s[i+6] == '-' && allDigits(s[i+7:i+11]) && !wordAfter(s, i+11): // SSN
			area, group, serial := atoi(s[i:i+3]), atoi(s[i+4:i+6]), atoi(s[i+7:i+11])
			if area != 0 && area != 666 && area < 900 && group != 0 && serial != 0 {
				out = append(out, detection{i, i + 11, KindNationalID})
				i += 10
			}
		case i+11 <= len(s) && allDigits(s[i:i+6]) && (s[i+6] == '-' || s[i+6] == '+') && allDigits(s[i+7:i+11]) && !wordAfter(s, i+11): // personnummer
			d := []byte(s[i:i+6] + s[i+7:i+11])
			month, day := atoi(s[i+2:i+4]), atoi(s[i+4:i+6])
			if month >= 1 && month <= 12 && day >= 1 && day <= 91 && luhn(d) {
				out = append(out, detection{i, i + 11, KindNationalID})
				i += 10
			}
		}
	}
	return out
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return len(s) > 0
}

func atoi(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// --- IBAN ---

// ibanLengths are the IBAN lengths of the countries that use one.
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
	"BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
	"ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
	"HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
	"LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
	"MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
	"RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}

func detectIBANs(s string, out []detection) []detection {
	var buf [40]byte
	for i := 0; i+15 <= len(s); i++ {
		if !isUpper(s[i]) || !isUpper(s[i+1]) || !isDigit(s[i+2]) || !isDigit(s[i+3]) || wordBefore(s, i) {
			continue
		}
		want, ok := ibanLengths[s[i:i+2]]
		if !ok {
			continue
		}
		// Compact, or in groups of four separated by single spaces.
		d := append(buf[:0], s[i:i+4]...)
		j := i + 4
		end := j
		for j < len(s) && len(d) < want {
			c := s[j]
			if isDigit(c) || isUpper(c) {
				d = append(d, c)
				j++
				end = j
				continue
			}
			if c == ' ' && (len(d))%4 == 0 && j+1 < len(s) && (isDigit(s[j+1]) || isUpper(s[j+1])) {
				j++
				continue
			}
			break
		}
		if len(d) != want || wordAfter(s, end) || !ibanValid(d) {
			continue
		}
		out = append(out, detection{i, end, KindIBAN})
		i = end - 1
	}
	return out
}

// ibanValid checks the mod-97 rule: the number with its first four
// characters moved to the end, letters as 10..35, is 1 modulo 97.
func ibanValid(d []byte) bool {
	rem := 0
	add := func(c byte) {
		if isDigit(c) {
			rem = (rem*10 + int(c-'0')) % 97
		} else {
			v := int(c-'A') + 10
			rem = (rem*100 + v) % 97
		}
	}
	for _, c := range d[4:] {
		add(c)
	}
	for _, c := range d[:4] {
		add(c)
	}
	return rem == 1
}

// --- IP addresses ---

func isHex(c byte) bool { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') }

func detectIPs(s string, out []detection) []detection {
	v6 := strings.IndexByte(s, ':') >= 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) && (!v6 || !(isHex(c) || c == ':')) {
			continue
		}
		if wordBefore(s, i) || (i > 0 && (s[i-1] == '.' || s[i-1] == ':')) {
			continue
		}
		j, colons, dots := i, 0, 0
		for j < len(s) && (isHex(s[j]) || s[j] == ':' || s[j] == '.') {
			switch s[j] {
			case ':':
				colons++
			case '.':
				dots++
			}
			j++
		}
		end := j
		for end > i && (s[end-1] == '.' || (s[end-1] == ':' && (end-2 < i || s[end-2] != ':'))) {
			end-- // a sentence's full stop or a trailing colon
		}
		if wordAfter(s, end) {
			i = j - 1
			continue
		}
		tok := s[i:end]
		dots = strings.Count(tok, ".")
		if colons >= 2 || dots == 3 {
			if a, err := netip.ParseAddr(tok); err == nil && (a.Is4() && dots == 3 || a.Is6() && colons >= 2) {
				out = append(out, detection{i, end, KindIP})
			}
		}
		i = j - 1
	}
	return out
}

// --- secrets ---

// secretPrefixes are the starts of well-known credential formats, each
// with the characters its body may use and the body's minimum length.
var secretPrefixes = []struct {
	prefix  string
	charset func(byte) bool
	min     int
	max     int
}{
	{"AKIA", isUpperDigit, 16, 16}, // AWS access key id
	{"ASIA", isUpperDigit, 16, 16},
	{"ghp_", isAlnum, 36, 36}, // GitHub tokens
	{"gho_", isAlnum, 36, 36},
	{"ghu_", isAlnum, 36, 36},
	{"ghs_", isAlnum, 36, 36},
	{"ghr_", isAlnum, 36, 36},
	{"github_pat_", isTokenChar, 60, 255},
	{"glpat-", isTokenChar, 20, 64}, // GitLab
	{"xoxb-", isTokenChar, 20, 255}, // Slack
	{"xoxp-", isTokenChar, 20, 255},
	{"xoxa-", isTokenChar, 20, 255},
	{"xoxr-", isTokenChar, 20, 255},
	{"AIza", isTokenChar, 35, 35},  // Google API key
	{"sk_live_", isAlnum, 20, 255}, // Stripe
	{"rk_live_", isAlnum, 20, 255},
	{"sk-ant-", isTokenChar, 32, 255}, // API keys of model providers
	{"sk-proj-", isTokenChar, 32, 255},
	{"sk-", isAlnum, 32, 255},
	{"eyJ", isJWTChar, 30, 4096}, // JSON web tokens, checked below
}

func isUpperDigit(c byte) bool { return isUpper(c) || isDigit(c) }
func isTokenChar(c byte) bool  { return isAlnum(c) || c == '-' || c == '_' }
func isJWTChar(c byte) bool    { return isTokenChar(c) || c == '.' }

// secretFirst indexes secretPrefixes by first byte, so that one pass over
// a text finds every candidate.
var secretFirst = func() (t [256][]int) {
	for i, p := range secretPrefixes {
		t[p.prefix[0]] = append(t[p.prefix[0]], i)
	}
	return t
}()

// secretStart marks the bytes a secret can start with.
var secretStart = func() (t [256]bool) {
	for _, p := range secretPrefixes {
		t[p.prefix[0]] = true
	}
	t['-'], t['B'], t['b'] = true, true, true
	return t
}()

func detectSecrets(s string, out []detection) []detection {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !secretStart[c] || (i > 0 && isAlnum(s[i-1])) {
			continue
		}
		switch {
		case c == '-' && strings.HasPrefix(s[i:], "-----BEGIN "):
			if end := privateKeyEnd(s, i); end > 0 {
				out = append(out, detection{i, end, KindSecret})
				i = end - 1
			}
			continue
		case (c == 'B' || c == 'b') && i+7 <= len(s) && strings.EqualFold(s[i:i+7], "bearer "):
			if start, end := bearerToken(s, i+7); end > 0 {
				out = append(out, detection{start, end, KindSecret})
				i = end - 1
				continue
			}
		}
		ks := secretFirst[c]
		if len(ks) == 0 || wordBefore(s, i) || i+1 >= len(s) {
			continue
		}
		for _, k := range ks {
			p := &secretPrefixes[k]
			if s[i+1] != p.prefix[1] || !strings.HasPrefix(s[i:], p.prefix) {
				continue
			}
			j := i + len(p.prefix)
			for j < len(s) && p.charset(s[j]) {
				j++
			}
			if n := j - i - len(p.prefix); n < p.min || n > p.max {
				continue
			}
			if p.prefix == "eyJ" {
				if j = jwtEnd(s, i, j); j < 0 {
					continue
				}
			}
			out = append(out, detection{i, j, KindSecret})
			i = j - 1
			break
		}
	}
	return out
}

// jwtEnd accepts header.payload.signature with a JSON header.
func jwtEnd(s string, start, end int) int {
	tok := s[start:end]
	for len(tok) > 0 && tok[len(tok)-1] == '.' {
		tok = tok[:len(tok)-1]
		end--
	}
	if strings.Count(tok, ".") != 2 || !strings.HasPrefix(tok, "eyJ") {
		return -1
	}
	parts := strings.Split(tok, ".")
	if len(parts[1]) < 4 || len(parts[2]) < 8 {
		return -1
	}
	return end
}

// privateKeyEnd returns the end of a private key block starting at i
// (the rest of the text when it is cut off), or -1.
func privateKeyEnd(s string, i int) int {
	const endMark = "PRIVATE KEY-----"
	off := i + len("-----BEGIN ")
	h := strings.Index(s[off:], endMark)
	if h < 0 || h > 40 {
		return -1
	}
	f := strings.Index(s[off:], "-----END ")
	if f < 0 {
		return len(s)
	}
	e := strings.Index(s[off+f:], endMark)
	if e < 0 {
		return len(s)
	}
	return off + f + e + len(endMark)
}

// bearerToken returns the token after "Bearer " at i when it is long and
// random enough to be a credential.
func bearerToken(s string, i int) (int, int) {
	j := i
	for j < len(s) && (isTokenChar(s[j]) || s[j] == '.' || s[j] == '~' || s[j] == '+' || s[j] == '/' || s[j] == '=') {
		j++
	}
	if j-i >= 20 && entropy(s[i:j]) >= 3.5 {
		return i, j
	}
	return -1, -1
}

// entropy is the Shannon entropy of s in bits per byte.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	h := 0.0
	n := float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
