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

// detectLookahead is how far past a value a detector may read to decide
// on it (a unit word after a number, the rest of an address after a
// colon). A stream holds a finding that ends this close to the end of the
// text so far until more text comes.
const detectLookahead = 16

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
	return isAlnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-' || c == '\''
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
		for start < at && (s[start] == '.' || s[start] == '\'') {
			start++
		}
		if start == at || strings.HasSuffix(s[:start], "://") {
			continue // no local part, or a URL's user (https://token@host)
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
		if len(tld) < 2 || !allLetters(tld) || scaleSuffix(s[at+1:end]) {
			continue
		}
		out = append(out, detection{start, end, KindEmail})
		off = end
	}
}

// scaleSuffix reports an image's scale suffix read as a domain:
// icon@2x.png, logo@1.5x.webp.
func scaleSuffix(domain string) bool {
	i := 0
	for i < len(domain) && (isDigit(domain[i]) || domain[i] == '.') {
		i++
	}
	return i > 0 && i < len(domain) && domain[i] == 'x' && (i+1 == len(domain) || domain[i+1] == '.')
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
		if len(d) >= 12 && len(d) <= 19 && !wordAfter(s, end) && cardPrefix(d) && luhn(d) &&
			!inDecimal(s, i, end) && cardGroups(s[i:end]) {
			out = append(out, detection{i, end, KindCard})
		}
		i = end
	}
	return out
}

// inDecimal reports digits that are a decimal's fraction (3.1415…) or
// its whole part (…5.05), or a number in scientific notation.
func inDecimal(s string, start, end int) bool {
	if start >= 2 && (s[start-1] == '.' || s[start-1] == ',') && isDigit(s[start-2]) {
		return true
	}
	return end+1 < len(s) && (s[end] == '.' || s[end] == ',' || s[end] == 'e' || s[end] == 'E') && isDigit(s[end+1])
}

// cardGroups reports a card number's grouping: none, fours (the last
// group may be shorter), or 4-6-5 and 4-6-4 (Amex, Diners).
func cardGroups(t string) bool {
	var lens [8]int
	g := 0
	for i := 0; i < len(t); i++ {
		if !isDigit(t[i]) {
			g++
			if g == len(lens) {
				return false
			}
			continue
		}
		lens[g]++
	}
	g++
	if g == 1 {
		return true
	}
	if g == 3 && lens[0] == 4 && lens[1] == 6 && (lens[2] == 5 || lens[2] == 4) {
		return true
	}
	for k := 0; k < g-1; k++ {
		if lens[k] != 4 {
			return false
		}
	}
	return lens[g-1] >= 1 && lens[g-1] <= 4
}

// detectPhones finds phone numbers: international ones (+ or 00, a
// country code, 8 to 15 digits) and national ones of the countries in
// phonePlans, in the groupings people write them in (spaces, dashes,
// dots, one slash, a bracketed area code or trunk "(0)"). A number
// written without separators counts only after a word such as "call" or
// "phone". Dates, ISBNs, ZIP+4 codes, thousands-grouped amounts, decimals
// and numbers after words such as "order" or "ISBN" do not count.
func detectPhones(s string, out []detection) []detection {
	var buf [32]byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '+' && c != '(' && !isDigit(c) {
			continue
		}
		if wordBefore(s, i) || (i > 0 && isDigit(c) && notPhoneStart(s, i)) {
			continue
		}
		start, plus := i, false
		if c == '+' || c == '(' {
			if i+1 >= len(s) || !isDigit(s[i+1]) {
				continue
			}
			if c == '+' {
				plus = true
				i++
			}
		}
		var r phoneRunInfo
		digits := phoneRun(s, i, buf[:0], &r)
		if r.openParen && c == '(' {
			continue // read again from the digit after the bracket
		}
		i = max(r.end-1, i)
		if wordAfter(s, r.end) || badPhoneFollow(s, r.end) {
			continue
		}
		d := digits
		switch {
		case plus:
			if r.trunkParen > 0 {
				d = append(d[:r.lens[0]], d[r.lens[0]+1:]...)
			}
			if !internationalPhone(d) {
				continue
			}
		case len(d) > 2 && d[0] == '0' && d[1] == '0' && r.lens[0] >= 2 && r.lens[0] <= 4 && (r.seps[1] != '.' || r.groups >= 3):
			// 00 and a country code: the international form without +.
			if r.groups < 2 || !internationalPhone(d[2:]) || wordsBefore(s, start, 3)&(ctxPhone|ctxNotNumber) == ctxNotNumber {
				continue
			}
		default:
			if !nationalPhone(s, start, d, &r) {
				continue
			}
		}
		out = append(out, detection{start, r.end, KindPhone})
	}
	return out
}

// phoneRunInfo describes a run of digits in phone groupings.
type phoneRunInfo struct {
	end        int
	groups     int
	lens       [8]int // digits per group (the first 8 groups)
	seps       [8]byte
	paren      int // index+1 of the bracketed group, 0 for none
	trunkParen int // 1 when a bracketed "(0)" follows the country code
	slashes    int
	openParen  bool // a bracket that never closed: (98765 43210)
}

// phoneRun reads digits joined by phone separators (single spaces,
// dashes or dots, dots not mixed with others; one slash, spaced or not;
// one bracketed group), appending the digits to buf and returning it.
func phoneRun(s string, i int, buf []byte, r *phoneRunInfo) (digits []byte) {
	digits = buf
	inGroup, paren := false, false
	sepKind := byte(0)
	r.end = i
	pending := byte(0)
	defer func() { r.openParen = paren }()
	for i < len(s) {
		c := s[i]
		switch {
		case isDigit(c):
			if !inGroup {
				if r.groups < len(r.lens) {
					r.seps[r.groups] = pending
				}
				r.groups++
				inGroup = true
				pending = 0
			}
			if r.groups <= len(r.lens) {
				r.lens[r.groups-1]++
			}
			digits = append(digits, c)
			i++
			r.end = i
		case c == '(' && !paren && !inGroup && r.paren == 0 && i+1 < len(s) && isDigit(s[i+1]):
			paren = true
			r.paren = r.groups + 1
			i++
		case c == ')' && paren && inGroup:
			paren = false
			inGroup = false
			if r.groups == 2 && r.lens[1] == 1 && digits[len(digits)-1] == '0' {
				r.trunkParen = 1 // +44 (0) 20 …
			}
			i++
			r.end = i
			pending = ')'
			// (555) 123-4567, (0)20 …, (089) / 123456, (11) 91234-5678
			j := i
			if j < len(s) && s[j] == ' ' {
				j++
			}
			if j+1 < len(s) && (s[j] == '-' || s[j] == '/') {
				j++
				if s[j] == ' ' {
					j++
				}
			}
			if j >= len(s) || !isDigit(s[j]) {
				return
			}
			i = j
		case c == '/' && inGroup && r.slashes == 0 && !paren && (r.groups == 1 || pending == ')'):
			// 089/1234567 or 0151 / 23456789
			j := i + 1
			if j < len(s) && s[j] == ' ' {
				j++
			}
			if j >= len(s) || !isDigit(s[j]) {
				return
			}
			r.slashes++
			inGroup = false
			pending = '/'
			i = j
		case c == ' ' && inGroup && i+2 < len(s) && s[i+1] == '/' && s[i+2] == ' ' && r.slashes == 0 && r.groups == 1:
			i++ // " / ": the slash case reads the rest
			inGroup = true
		case (c == ' ' || c == '-' || c == '.') && inGroup && !paren && i+1 < len(s) && (isDigit(s[i+1]) || (s[i+1] == '(' && c == ' ')):
			switch {
			case sepKind == 0:
				sepKind = c
			case c == sepKind:
			case c == '.' || sepKind == '.':
				return
			}
			inGroup = false
			pending = c
			i++
		case inGroup && !paren && (strings.HasPrefix(s[i:], "\u00a0") || strings.HasPrefix(s[i:], "\u202f")):
			// A no-break space, as word processors put between groups.
			w := 2
			if s[i] != 0xC2 {
				w = 3
			}
			if i+w >= len(s) || !isDigit(s[i+w]) || sepKind == '.' {
				return
			}
			inGroup = false
			pending = ' '
			i += w
		default:
			return
		}
	}
	return
}

// notPhoneStart reports a digit at i that continues something else: a
// decimal, a range, a path, an amount, a time, an order number.
func notPhoneStart(s string, i int) bool {
	switch s[i-1] {
	case '.', ',', '-', '#', '$', '\\', '_':
		return true
	case ':':
		return i > 1 && isDigit(s[i-2])
	case '/':
		return i < 2 || !isDigit(s[i-2]) // a path, not a list: 030 123456/0171 1234567
	}
	return false
}

// badPhoneFollow reports a run that goes on as something else: a
// percentage, degrees, a time, a decimal or a range.
func badPhoneFollow(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	switch s[i] {
	case '%', '*', '^', '=', '@':
		return true
	case ':', '.', ',', '-':
		return i+1 < len(s) && isDigit(s[i+1])
	case 0xC2: // ° and other Latin-1 signs
		return i+1 < len(s) && s[i+1] == 0xB0
	}
	return false
}

// internationalPhone checks the digits after + or 00: a country code
// (the first digit is never 0) and a total of 8 to 15 digits; for the
// countries in phonePlans, the national number's length.
func internationalPhone(d []byte) bool {
	if len(d) < 8 || len(d) > 15 || d[0] == '0' {
		return false
	}
	for i := range phonePlans {
		p := &phonePlans[i]
		if len(d) > len(p.cc) && string(d[:len(p.cc)]) == p.cc {
			n := len(d) - len(p.cc)
			return n >= p.nsnMin && n <= p.nsnMax
		}
	}
	return true
}

// A phonePlan is a country's numbering as far as the detector needs it:
// its calling code and the length of the national significant number
// (the number without the trunk 0 or the country code).
type phonePlan struct {
	country        string
	cc             string
	nsnMin, nsnMax int
}

// phonePlans are the countries whose national formats the phone detector
// knows. Numbers written with a trunk 0 (every country here but the US,
// Canada, Spain, Italy and India's mobiles) are 0 and 6 to 11 digits.
var phonePlans = []phonePlan{
	{"US/CA", "1", 10, 10},
	{"GB", "44", 9, 10},
	{"IE", "353", 7, 9},
	{"DE", "49", 6, 11},
	{"AT", "43", 4, 12},
	{"CH", "41", 9, 9},
	{"FR", "33", 9, 9},
	{"BE", "32", 8, 9},
	{"NL", "31", 9, 9},
	{"ES", "34", 9, 9},
	{"IT", "39", 6, 11},
	{"SE", "46", 7, 9},
	{"IN", "91", 10, 10},
	{"JP", "81", 9, 10},
	{"AU", "61", 9, 9},
	{"BR", "55", 10, 11},
}

// nationalPhone decides whether a run without + is a national number of
// one of phonePlans' countries.
func nationalPhone(s string, start int, d []byte, r *phoneRunInfo) bool {
	n, g := len(d), r.groups
	if n < 7 || n > 12 || g > len(r.lens) {
		return false
	}
	ctx := wordsBefore(s, start, 3)
	if ctx&ctxPhone == 0 && ctx&ctxNotNumber != 0 {
		return false
	}
	if g == 1 && ctx&ctxPhone == 0 && ctx&ctxNumber == 0 {
		return false // without separators only when the text says it is a phone
	}
	sep := byte(0)
	for k := 1; k < g; k++ {
		if r.seps[k] != ' ' && r.seps[k] != ')' {
			sep = r.seps[k]
		}
	}
	// Every group has two digits or more, but for the leading 1 of a North
	// American number.
	for k := 0; k < g; k++ {
		if r.lens[k] < 2 && !(k == 0 && d[0] == '1' && n == 11) {
			return false
		}
	}
	if sep == '.' && (g < 3 || r.paren > 0) {
		return false // a decimal, not a phone
	}
	if isDateShape(d, r) || moneyAround(s, start, r.end) || inList(s, start, r.end) {
		return false
	}
	if g == 2 && sep == '-' && r.lens[0] == 5 && r.lens[1] == 4 && n == 9 {
		return false // a ZIP+4 code
	}
	if thousands(r) && !(n == 9 && g == 3 && d[0] >= '6' && !zeroGroup(d, r)) {
		return false
	}
	shape := func(ls ...int) bool {
		if len(ls) != g {
			return false
		}
		for k, l := range ls {
			if r.lens[k] != l {
				return false
			}
		}
		return true
	}
	switch {
	case d[0] == '0':
		// A trunk 0 and the national number: GB, IE, DE, AT, CH, FR, BE,
		// NL, SE, IN landlines, JP, AU, IT landlines.
		if d[1] == '0' {
			return false
		}
		return n >= 9 || (n >= 7 && (g >= 3 || r.paren == 1 || ctx&ctxPhone != 0))
	case r.paren == 1 && r.lens[0] == 2 && d[0] != '0':
		// Brazil: (21) 2345-6789, (11) 91234-5678
		return (n == 10 || n == 11) && r.lens[g-1] == 4
	case g == 3 && r.seps[2] == '-' && (shape(2, 4, 4) || shape(2, 5, 4) && d[2] == '9') && d[0] != '0':
		// Brazil without brackets: 21 2345-6789, 11 91234-5678
		return true
	case n == 10 && (string(d[:4]) == "1300" || string(d[:4]) == "1800") && (g == 1 || shape(4, 3, 3) || shape(4, 6)):
		// Australia's national numbers: 1300 123 456
		return true
	case n == 11 && d[0] == '1':
		// 1 and a North American number.
		return d[1] >= '2' && d[4] >= '2' && (g == 1 || shape(1, 3, 3, 4) || shape(1, 3, 7) || r.paren == 2)
	case n == 10:
		// North America ((415) 555-2671), India (98765 43210), Italy's
		// mobiles (347 123 4567).
		if d[0] < '2' {
			return false
		}
		if shape(5, 5) {
			// India's mobiles start with 6 to 9, and are written with a
			// space: 98765-43210 only where the text says it is a phone
			// (60000-61000 is a range).
			return d[0] >= '6' && (r.seps[1] == ' ' || ctx&ctxPhone != 0)
		}
		return g == 1 || shape(3, 3, 4) || shape(3, 7) || shape(4, 3, 3) || shape(3, 4, 3)
	case n == 9 && d[0] >= '6':
		// Spain: 612 345 678, 612 34 56 78, 91 123 45 67.
		return g == 1 || shape(3, 3, 3) || shape(3, 2, 2, 2) || shape(2, 3, 2, 2) || shape(2, 3, 4)
	}
	return false
}

// inList reports a run that is part of a longer space-separated list of
// short numbers or hex bytes (4b 61 308 73 65), not a phone number.
func inList(s string, start, end int) bool {
	item := func(t string) bool {
		if len(t) == 0 || len(t) > 4 {
			return false
		}
		digit := false
		for i := 0; i < len(t); i++ {
			if !isHex(t[i]) {
				return false
			}
			digit = digit || isDigit(t[i])
		}
		return digit
	}
	if start >= 2 && s[start-1] == ' ' {
		j := start - 1
		for j > 0 && isAlnum(s[j-1]) {
			j--
		}
		if item(s[j : start-1]) {
			return true
		}
	}
	if end+1 < len(s) && s[end] == ' ' {
		k := end + 1
		for k < len(s) && isAlnum(s[k]) {
			k++
		}
		if item(s[end+1 : k]) {
			return true
		}
	}
	return false
}

// isDateShape reports dd.mm.yyyy, mm/dd/yy, yyyy-mm-dd and the like.
func isDateShape(d []byte, r *phoneRunInfo) bool {
	if r.groups != 3 {
		return false
	}
	l0, l1, l2 := r.lens[0], r.lens[1], r.lens[2]
	num := func(off, l int) int { return atoi(string(d[off : off+l])) }
	switch {
	case l0 <= 2 && l1 <= 2 && (l2 == 2 || l2 == 4):
		a, b := num(0, l0), num(l0, l1)
		return a >= 1 && b >= 1 && ((a <= 31 && b <= 12) || (a <= 12 && b <= 31))
	case l0 == 4 && l1 <= 2 && l2 <= 2:
		m, day := num(4, l1), num(4+l1, l2)
		return m >= 1 && m <= 12 && day >= 1 && day <= 31
	}
	return false
}

// thousands reports an amount grouped in thousands: 1 234 567, 12.345.678.
func thousands(r *phoneRunInfo) bool {
	if r.groups < 3 || r.paren > 0 || r.lens[0] > 3 {
		return false
	}
	for k := 1; k < r.groups; k++ {
		if r.lens[k] != 3 || (r.seps[k] != ' ' && r.seps[k] != '.') {
			return false
		}
	}
	return true
}

// zeroGroup reports a group of 000 after the first, as amounts have.
func zeroGroup(d []byte, r *phoneRunInfo) bool {
	off := r.lens[0]
	for k := 1; k < r.groups; k++ {
		if string(d[off:off+r.lens[k]]) == "000" {
			return true
		}
		off += r.lens[k]
	}
	return false
}

// moneyAround reports a currency sign right before start, or a currency or
// unit word right after end.
func moneyAround(s string, start, end int) bool {
	j := start
	for j > 0 && s[j-1] == ' ' {
		j--
	}
	if currencySign(s[:j], true) {
		return true
	}
	k := end
	for k < len(s) && s[k] == ' ' {
		k++
	}
	if k == end || k >= len(s) {
		return false
	}
	if currencySign(s[k:], false) {
		return true
	}
	e := k
	for e < len(s) && isLetter(s[e]) {
		e++
	}
	return wordKind(s[k:e])&ctxUnit != 0
}

// currencySign reports a currency sign at the end (before) or the start
// of s.
func currencySign(s string, before bool) bool {
	for _, sign := range [...]string{"$", "€", "£", "¥", "₹"} {
		if before && strings.HasSuffix(s, sign) || !before && strings.HasPrefix(s, sign) {
			return true
		}
	}
	return false
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
		case i+9 <= len(s) && allDigits(s[i:i+8]) && isUpper(s[i+8]) && !wordAfter(s, i+9) && !inDecimal(s, i, i+8) && !signed(s, i): // DNI
			if dniLetters[atoi(s[i:i+8])%23] == s[i+8] {
				out = append(out, detection{i, i + 9, KindNationalID})
				i += 8
			}
		case i+11 <= len(s) && allDigits(s[i:i+3]) && (s[i+3] == '-' || s[i+3] == ' ') && s[i+6] == s[i+3] && allDigits(s[i+4:i+6]) && allDigits(s[i+7:i+11]) && !wordAfter(s, i+11) && !ssnGoesOn(s, i, i+11): // SSN: 123-45-6789, 123 45 6789
			if ssnValid(s[i:i+3], s[i+4:i+6], s[i+7:i+11]) {
				out = append(out, detection{i, i + 11, KindNationalID})
				i += 10
			}
		case i+9 <= len(s) && allDigits(s[i:i+9]) && !wordAfter(s, i+9) && !ssnGoesOn(s, i, i+9): // SSN written 123456789, after a word that says so
			if ssnValid(s[i:i+3], s[i+3:i+5], s[i+5:i+9]) && wordsBefore(s, i, 4)&ctxSSN != 0 {
				out = append(out, detection{i, i + 9, KindNationalID})
				i += 8
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

// signed reports a number with a sign before it (+99585767E-22).
func signed(s string, i int) bool { return i > 0 && (s[i-1] == '+' || s[i-1] == '-') }

// ssnValid applies the rules of issued US social security numbers: no
// area 000, 666 or 9xx, no group 00, no serial 0000.
func ssnValid(area, group, serial string) bool {
	a := atoi(area)
	return a != 0 && a != 666 && a < 900 && atoi(group) != 0 && atoi(serial) != 0
}

// ssnGoesOn reports digits joined before or after [start, end): a longer
// number that only contains an SSN's shape.
func ssnGoesOn(s string, start, end int) bool {
	if start > 0 && (s[start-1] == '-' || s[start-1] == '.' || s[start-1] == '/') {
		return true
	}
	return end+1 < len(s) && (s[end] == '-' || s[end] == '.' || s[end] == '/') && isDigit(s[end+1])
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
		colons = strings.Count(tok, ":")
		if colons == 1 && dots == 3 {
			// An IPv4 address and a port: 10.1.2.3:8080
			c := strings.IndexByte(tok, ':')
			if p := tok[c+1:]; len(p) >= 1 && len(p) <= 5 && allDigits(p) {
				tok, end, colons = tok[:c], i+c, 0
			}
		}
		switch {
		case colons >= 2:
			if a, err := netip.ParseAddr(tok); err == nil && a.Is6() && hasHexDigit(tok) {
				out = append(out, detection{i, end, KindIP})
			}
		case dots == 3 && colons == 0:
			// 0.x.x.x is no host's address but a version: 0.10.1.0
			if a, err := netip.ParseAddr(tok); err == nil && a.Is4() && (tok[0] != '0' || tok == "0.0.0.0") && !badIPFollow(s, end) && wordsBefore(s, i, 1)&ctxNotIP == 0 {
				out = append(out, detection{i, end, KindIP})
			}
		}
		i = j - 1
	}
	return out
}

func hasHexDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if isHex(s[i]) {
			return true
		}
	}
	return false
}

// badIPFollow reports a dotted quad that goes on as a longer version
// (1.2.3.4-beta, 1.2.3.4.5 is cut before) or a percentage.
func badIPFollow(s string, i int) bool {
	return i+1 < len(s) && (s[i] == '-' || s[i] == '+') && isLetter(s[i+1]) || i < len(s) && s[i] == '%'
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

// privateKeyEnd returns the end of a private key block starting at i, or
// -1. The block is the BEGIN line, the base64 lines (and encryption
// headers) that follow it, and the END line when it follows them; a key
// cut short ends at its last base64 line, so text after it stays text.
// A key flattened onto one line (spaces or literal \n between its parts)
// ends at its END marker.
func privateKeyEnd(s string, i int) int {
	const endMark = "PRIVATE KEY-----"
	off := i + len("-----BEGIN ")
	h := strings.Index(s[off:], endMark)
	if h < 0 || h > 40 || strings.IndexByte(s[off:off+h], '\n') >= 0 {
		return -1
	}
	end := off + h + len(endMark)
	// Flattened: base64, spaces and \n up to an END marker on this line.
	if nl := strings.IndexByte(s[end:], '\n'); nl != 0 {
		line := s[end:]
		if nl > 0 {
			line = line[:nl]
		}
		if f := strings.Index(line, "-----END "); f >= 0 && flatBase64(line[:f]) {
			if e := strings.Index(line[f:], endMark); e >= 0 {
				return end + f + e + len(endMark)
			}
		}
	}
	if strings.HasPrefix(s[end:], `\n`) {
		// Flattened with literal \n and no END marker: the base64 parts.
		for p := end; strings.HasPrefix(s[p:], `\n`); {
			q := p + 2
			e := strings.Index(s[q:], `\n`)
			if e < 0 {
				e = len(s) - q
				for k := q; k < len(s); k++ {
					if !isAlnum(s[k]) && s[k] != '+' && s[k] != '/' && s[k] != '=' {
						e = k - q
						break
					}
				}
			}
			if !base64Line(s[q : q+e]) {
				if e == 0 {
					end = q // the trailing \n
				}
				break
			}
			end, p = q+e, q+e
		}
		return end
	}
	header := false // Proc-Type/DEK-Info lines, then one blank line
	for p := end; p < len(s) && s[p] == '\n'; {
		q := p + 1
		e := strings.IndexByte(s[q:], '\n')
		if e < 0 {
			e = len(s) - q
		}
		next := q + e
		line := strings.TrimRight(s[q:next], " \r")
		indent := len(line) - len(strings.TrimLeft(line, " \t"))
		q, line = q+indent, line[indent:] // a key indented in YAML
		switch {
		case strings.HasPrefix(line, "-----END ") && strings.HasSuffix(line, endMark):
			return q + len(line)
		case strings.HasPrefix(line, "Proc-Type:") || strings.HasPrefix(line, "DEK-Info:"):
			header = true
		case line == "" && header:
			header = false
		case base64Line(line):
		default:
			return end
		}
		end = q + len(line)
		p = next
	}
	return end
}

// base64Line reports a line of a PEM body: base64 only, and long, or
// short with a digit or +/= (so a one-word line of prose is not one).
func base64Line(l string) bool {
	if l == "" {
		return false
	}
	marked := false
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case isDigit(c) || c == '+' || c == '/' || c == '=':
			marked = true
		case isLetter(c):
		default:
			return false
		}
	}
	return len(l) >= 20 || marked
}

// flatBase64 reports text made only of base64, spaces and literal \n.
func flatBase64(t string) bool {
	n := 0
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case isAlnum(c) || c == '+' || c == '/' || c == '=':
			n++
		case c == ' ' || c == '\t' || c == '\r':
		case c == '\\' && i+1 < len(t) && t[i+1] == 'n':
			i++
		default:
			return false
		}
	}
	return n >= 20
}

// bearerToken returns the token after "Bearer " at i when it is long and
// random enough to be a credential.
func bearerToken(s string, i int) (int, int) {
	j := i
	for j < len(s) && (isTokenChar(s[j]) || s[j] == '.' || s[j] == '~' || s[j] == '+' || s[j] == '/' || s[j] == '=') {
		j++
	}
	tok := strings.TrimRight(s[i:j], "=")
	if j-i >= 20 && strings.IndexByte(tok, '=') < 0 && entropy(s[i:j]) >= 3.5 {
		return i, j // base64's = pads the end only: KEY=value is a setting
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

// --- context words ---

// Kinds of words that say what a number after them is.
const (
	ctxPhone     = 1 << iota // call, phone, tel, mobile …
	ctxNotNumber             // order, invoice, ISBN, tracking … : not a phone
	ctxSSN                   // SSN, social (security number)
	ctxUnit                  // after a number: EUR, dollars, users …
	ctxNotIP                 // version, section … : a dotted number, not an address
	ctxNumber                // number: a phone's, unless a word says what else
)

var contextWords = func() map[string]uint8 {
	m := map[string]uint8{}
	add := func(kind uint8, words string) {
		for _, w := range strings.Fields(words) {
			m[w] |= kind
		}
	}
	add(ctxPhone, "call calling phone phones telephone tel tlf tfn ph mobile mob cell cellphone whatsapp sms fax "+
		"ring dial hotline helpline landline freephone contact reach handy telefon telefonnummer mobil "+
		"movil telefono portable cellulare cellphone numero")
	add(ctxNotNumber, "isbn issn doi pmid order orders invoice account acct iban ref reference tracking serial sku part "+
		"ticket zip postcode version build release patent receipt transaction booking confirmation policy "+
		"claim batch lot vin imei ean upc gtin barcode pin otp passport licence license ssn social page pages "+
		"pp row rows step steps item items id ids")
	add(ctxPhone, "teléfono móvil numéro téléphone rufnummer mobilnummer handynummer")
	add(ctxNumber, "number num")
	add(ctxSSN, "ssn ssns ss social")
	add(ctxUnit, "eur usd gbp inr sek nok dkk chf jpy aud cad brl kr euro euros dollars dollar pounds rupees yen "+
		"km kg mb gb kb tb bytes users people rows tokens views votes years miles points tonnes lakh crore "+
		"times requests downloads visitors residents inhabitants page pages views hits clicks visits copies units")
	add(ctxNotIP, "version versions ver release releases build section chapter figure fig table rule step clause article art oid mib")
	return m
}()

func isLetter(c byte) bool { return isUpper(c) || isLower(c) }

// isWordByte is a letter, or a byte of a non-ASCII character (the words
// read before a number may be in any language).
func isWordByte(c byte) bool { return isLetter(c) || c >= 0x80 }

// wordKind is the kind of a word (any case), 0 when it has none.
func wordKind(w string) uint8 {
	var b [20]byte
	if len(w) == 0 || len(w) > len(b) {
		return 0
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if isUpper(c) {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return contextWords[string(b[:len(w)])]
}

// wordsBefore returns the kinds of the up to n words (runs of letters)
// that end within 40 bytes before i on the same line, nearest first.
func wordsBefore(s string, i, n int) uint8 {
	lo := max(0, i-40)
	var kinds uint8
	for j := i; n > 0 && j > lo; n-- {
		for j > lo && !isWordByte(s[j-1]) {
			if s[j-1] == '\n' || isDigit(s[j-1]) {
				return kinds
			}
			j--
		}
		e := j
		for j > lo && isWordByte(s[j-1]) {
			j--
		}
		if e == j || (j == lo && lo > 0) {
			break
		}
		kinds |= wordKind(s[j:e])
	}
	return kinds
}
