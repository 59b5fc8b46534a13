package llmcache

import (
	_ "embed"
	"slices"
	"strings"
	"sync"
)

// The built-in matcher's word lists. Two kinds of knowledge live here:
// what may be ignored or merged (function words, question framing,
// spelling variants, synonyms, aliases), and what must never be (words
// that flip or direct a question). Merging is where a cache goes wrong,
// so every merge is either from WordNet's most frequent senses (see
// internal/lexgen) or listed here by hand, and nothing in the "never"
// lists is ever dropped.

//go:generate sh -c "go run ./internal/lexgen -dict /usr/share/wordnet > wordnet.txt"
//go:embed wordnet.txt
var wordnetTable string

var (
	known    = map[string]bool{}   // words people use, from WordNet
	bases    []string              // other nouns and verbs, sorted
	lemmas   = map[string]string{} // irregular form → lemma
	synonyms = map[string]string{} // word → its group's canonical word

	lexicon sync.Once // the tables are read on first use, not by every llmgw
)

// isWord reports whether WordNet has w as a word.
func isWord(w string) bool {
	if known[w] {
		return true
	}
	_, found := slices.BinarySearch(bases, w)
	return found
}

func loadLexicon() {
	for line := range strings.Lines(wordnetTable) {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "b":
			bases = append(bases, f[1])
		case len(f) == 2 && f[0] == "w":
			known[f[1]] = true
		case len(f) == 3 && f[0] == "l":
			lemmas[f[1]] = f[2]
		case len(f) == 3 && f[0] == "s":
			synonyms[f[1]] = f[2]
		}
	}
	for _, g := range strings.Split(synonymGroups, "\n") {
		words := strings.Fields(g)
		for _, w := range words[min(1, len(words)):] {
			synonyms[w] = words[0]
		}
	}
	for _, g := range strings.Split(spellings, "\n") {
		if f := strings.Fields(g); len(f) == 2 {
			variants[f[0]] = f[1]
		}
	}
	for _, p := range strings.Split(phraseTable, "\n") {
		from, to, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		ws := strings.Fields(from)
		phrases[ws[0]] = append(phrases[ws[0]], phrase{ws, strings.Fields(to)})
	}
	for _, w := range strings.Fields(stopwordList) {
		stopwords[w] = true
	}
	slices.Sort(bases)
}

// synonymGroups are merged by hand where WordNet's senses are too fine or
// too broad: the first word of a line is the group's canonical word.
// Only words that mean the same in questions people ask a chat model.
const synonymGroups = `change update modify edit alter
information info details
payment billing
buy purchase
begin start
end finish
big large
fast rapid speedy
error bug
fix repair resolve troubleshoot
picture photo photograph image pic
movie film
car automobile
phone smartphone cellphone
email e-mail
wifi wi-fi
repository repo
configuration config
documentation docs
database db
delete remove
create make
use utilize
get obtain
find locate
difference differ compare comparison
meaning definition define
summary summarize summarise
example instance
cost price pricing
job occupation
doctor physician
lawyer attorney
child kid
sick ill
cheap inexpensive
expensive costly pricey
tip advice suggestion recommendation
allow permit
sad unhappy
happy glad
story tale
author writer
write compose
learn study`

// spellings maps British to American spellings the rules in
// americanize do not cover, and a few other variant spellings.
var variants = map[string]string{}

const spellings = `grey gray
tyre tire
aluminium aluminum
mum mom
programme program
cheque check
maths math
jewellery jewelry
pyjamas pajamas
plough plow
mould mold
ageing aging
judgement judgment
enquiry inquiry
enquire inquire
learnt learned
spelt spelled
dreamt dreamed
burnt burned
cosy cozy
draught draft
kerb curb
storey story
sceptical skeptical
manoeuvre maneuver
oestrogen estrogen
paediatric pediatric
anaesthesia anesthesia
diarrhoea diarrhea
haemoglobin hemoglobin
leukaemia leukemia
foetus fetus
analyse analyze
analysed analyzed
analysing analyzing
paralyse paralyze
catalyse catalyze
travelling traveling
travelled traveled
traveller traveler
cancelled canceled
cancelling canceling
modelling modeling
labelled labeled
labelling labeling
fulfil fulfill
enrol enroll
instalment installment
practise practice
licence license
defence defense
offence offense
pretence pretense
catalogue catalog
dialogue dialog
analogue analog
centre center
theatre theater
metre meter
litre liter
fibre fiber
calibre caliber
kilometre kilometer
centimetre centimeter
millimetre millimeter
colour color
favourite favorite
favour favor
flavour flavor
honour honor
labour labor
neighbour neighbor
rumour rumor
humour humor
harbour harbor
behaviour behavior
vapour vapor
armour armor
savoury savory
organisation organization
realise realize
recognise recognize
apologise apologize
optimise optimize
customise customize
minimise minimize
maximise maximize
prioritise prioritize
summarise summarize
categorise categorize
authorise authorize
visualise visualize
memorise memorize
normalise normalize
initialise initialize
serialise serialize
synchronise synchronize
utilise utilize
specialise specialize
localisation localization`

// phrases are rewritten before anything else, longest first: aliases of
// one entity become one token, and framing that asks nothing disappears.
// Tokens are lower case; "_" in a result marks an entity.
type phrase struct{ from, to []string }

var phrases = map[string][]phrase{}

const phraseTable = `united states of america = usa_
united states = usa_
u.s.a = usa_
u.s = usa_
united kingdom = uk_
u.k = uk_
great britain = britain_
world war ii = ww2_
world war 2 = ww2_
world war two = ww2_
second world war = ww2_
wwii = ww2_
ww2 = ww2_
world war i = ww1_
world war 1 = ww1_
world war one = ww1_
first world war = ww1_
wwi = ww1_
ww1 = ww1_
new york city = nyc_
nyc = nyc_
los angeles = la_
san francisco = sf_
golang = golang_
javascript = javascript_
js = javascript_
typescript = typescript_
ts = typescript_
postgresql = postgres_
postgres = postgres_
psql = postgres_
k8s = kubernetes_
kubernetes = kubernetes_
node.js = nodejs_
nodejs = nodejs_
node js = nodejs_
c++ = cpp_
cpp = cpp_
c# = csharp_
csharp = csharp_
artificial intelligence = ai_
machine learning = ml_
operating system = os_
per cent = percent
percentage = percent
pct = percent
% = percent
how many people live in = population
how many people live = population
how many inhabitants = population
what is the best way to = how
what's the best way to = how
whats the best way to = how
what is the easiest way to = how
what's the easiest way to = how
what is the right way to = how
what's the right way to = how
what's the proper way to = how
what is the proper way to = how
what is the way to = how
is there a way to = how
is it possible to = how
the best way to = how
best way to = how
how would i go about = how
how do i go about = how
how should i go about = how
how to go about = how
steps to = how
in what way = how
a lot of = many
lots of = many
so much = much
at all =
as well =
i was wondering =
i'm wondering =
im wondering =
i wonder =
i'd like to know =
i would like to know =
i want to know =
i need to know =
do you know =
can you tell me =
could you tell me =
can you explain =
could you explain =
can you help me =
could you help me =
help me =
i need help =
i need some help =
quick question =
just curious =
any idea =
any ideas =
thanks in advance =
thank you =
in simple terms =
in simple words =
in plain english =
for me =
tell me =
tell us =
show me =
show us =
give me =
give us =
let me know =
let me =
how do you say = translate
how do i say = translate
how to say = translate
how would you say = translate`

// stopwordList are dropped: articles, pronouns, auxiliaries, most
// prepositions, question framing. Kept on purpose (never listed here):
// negations (not, no, never, without, n't), quantities and polarity
// (much, little, many, few, more, less, too, all, only, enough, high,
// low), direction and order (from, before, after, above, below, over,
// under, than, vs), deixis of time (next, last, this before a time word),
// question words that change the answer (why, when, where, who), tense
// (was, were, did, will), modality (should, must, might).
var stopwords = map[string]bool{}

const stopwordList = `a an the of in on at to for with and or into onto upon about within via as
is are am be been being do does doing done have has having can could would shall may
what's whats how's hows
i me my mine myself i'm im i've ive i'd id i'll you your yours yourself you're we us our ours
it its it's itself this that these those there here they them their they're
please pls plz kindly explain describe
some any just quickly exactly actually really basically simply quick
hi hello hey thanks thank guys folks ok okay so well also question questions curious
want wanted wanting need trying try tried going gonna wanna
one's someone somebody anyone anybody something anything way ways
possible able`

// negators flip a question's polarity. Each one counts; two questions
// must have as many.
var negators = map[string]bool{"not": true, "no": true, "never": true, "without": true, "none": true,
	"nothing": true, "nobody": true, "nowhere": true, "neither": true, "nor": true, "cannot": true,
	"n't": true, "unable": true, "lack": true, "lacking": true}

// contractions of a negation: the word and its negation.
var negContractions = map[string]string{"can't": "can", "cant": "can", "won't": "will", "wont": "will",
	"don't": "do", "dont": "do", "doesn't": "do", "doesnt": "do", "didn't": "did", "didnt": "did",
	"isn't": "is", "isnt": "is", "aren't": "are", "arent": "are", "wasn't": "was", "wasnt": "was",
	"weren't": "were", "werent": "were", "shouldn't": "should", "shouldnt": "should",
	"wouldn't": "would", "wouldnt": "would", "couldn't": "could", "couldnt": "could",
	"hasn't": "has", "hasnt": "has", "haven't": "have", "havent": "have", "hadn't": "had",
	"mustn't": "must", "mustnt": "must", "ain't": "is"}

// questionWords set what a question asks. How and what are compatible
// with a question that has none ("reverse a list" asks how), not with
// each other ("how is cheese made" is not "what is cheese made of");
// the others are words every match must share.
var questionWords = map[string]string{"how": "how", "what": "what", "which": "what", "who": "who",
	"whom": "who", "whose": "who", "when": "when", "where": "where", "why": "why"}

// pronouns of the third person keep their gender: "tell him" is not
// "tell her".
var pronouns = map[string]string{"he": "he~", "him": "he~", "his": "he~", "himself": "he~",
	"she": "she~", "her": "she~", "hers": "she~", "herself": "she~"}

// tense words become one marker each, so "who was" is not "who is" and
// "will" is not "did".
var tense = map[string]string{"was": "past~", "were": "past~", "did": "past~", "will": "future~",
	"won't": "future~", "shall": "future~"}

// orderMarkers make word order part of a question's meaning: the words
// around them must stand in the same order in both questions ("USD to
// EUR" is not "EUR to USD").
var orderMarkers = map[string]bool{"to": true, "into": true, "from": true, "than": true, "vs": true,
	"versus": true, "against": true, "over": true, "before": true, "after": true, "above": true,
	"below": true, "under": true, "north": true, "south": true, "east": true, "west": true,
	"minus": true, "divided": true, "per": true, "then": true, "towards": true, "toward": true}

// timeWords make "this"/"coming" before them part of the question.
var timeWords = map[string]bool{"weekend": true, "week": true, "month": true, "year": true, "morning": true,
	"afternoon": true, "evening": true, "night": true, "time": true, "season": true, "summer": true,
	"winter": true, "spring": true, "autumn": true, "fall": true, "quarter": true, "semester": true,
	"monday": true, "tuesday": true, "wednesday": true, "thursday": true, "friday": true, "saturday": true,
	"sunday": true, "decade": true, "century": true, "term": true, "day": true}

// numberWords are spelled-out numbers.
var numberWords = map[string]int{"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
	"seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
	"fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
	"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
	"ninety": 90, "dozen": 12, "hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}

// currencies written as symbols become the currency's word.
var currencySymbols = map[rune]string{'$': "usd", '€': "eur", '£': "gbp", '¥': "jpy", '₹': "inr"}

// units are merged with their spellings, and are words a question must
// share ("km" is "kilometers"; "miles" is not).
var units = map[string]string{"usd": "usd", "dollar": "usd", "dollars": "usd", "bucks": "usd",
	"eur": "eur", "euro": "eur", "euros": "eur", "gbp": "gbp", "sterling": "gbp", "jpy": "jpy", "yen": "jpy",
	"inr": "inr", "rupee": "inr", "rupees": "inr",
	"km": "kilometer", "kms": "kilometer", "kilometer": "kilometer", "kilometers": "kilometer",
	"mi": "mile", "mile": "mile", "miles": "mile", "kg": "kilogram", "kgs": "kilogram", "kilo": "kilogram",
	"kilos": "kilogram", "kilogram": "kilogram", "kilograms": "kilogram", "lb": "pound", "lbs": "pound",
	"pound": "pound", "pounds": "pound", "g": "gram", "gram": "gram", "grams": "gram", "mg": "milligram",
	"cm": "centimeter", "mm": "millimeter", "m": "meter", "meter": "meter", "meters": "meter",
	"ft": "foot", "feet": "foot", "foot": "foot", "in.": "inch", "inch": "inch", "inches": "inch",
	"l": "liter", "liter": "liter", "liters": "liter", "ml": "milliliter", "oz": "ounce", "ounce": "ounce",
	"ounces": "ounce", "gb": "gigabyte", "gigabyte": "gigabyte", "gigabytes": "gigabyte", "mb": "megabyte",
	"megabyte": "megabyte", "megabytes": "megabyte", "tb": "terabyte", "kb": "kilobyte",
	"°c": "celsius", "celsius": "celsius", "centigrade": "celsius", "°f": "fahrenheit", "fahrenheit": "fahrenheit",
	"c": "celsius", "f": "fahrenheit", "h": "hour", "hr": "hour", "hrs": "hour", "hour": "hour", "hours": "hour",
	"min": "minute", "mins": "minute", "minute": "minute", "minutes": "minute", "sec": "second",
	"secs": "second", "s": "second", "seconds": "second", "mph": "mph", "kmh": "kph", "kph": "kph",
	"am": "am", "a.m": "am", "pm": "pm", "p.m": "pm"}

// guardedWords change the answer whenever they change, whatever an
// embedding model thinks of them: polarity and quantity, time, language,
// format, tone, manner of travel.
var guardedWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`much little many few more less most least too all every only both either
	enough high low higher lower highest lowest big small bigger smaller biggest smallest large largest
	long short longer shorter longest shortest hot cold warm cool good bad better worse best worst
	fast slow faster slower fastest slowest cheap expensive cheaper cheapest early late earlier later
	safe dangerous safer allowed allow forbidden forbid legal illegal true false right wrong left
	increase decrease raise lower rise fall up down in out on off open close start stop begin end
	first last next previous this today tomorrow yesterday tonight now morning evening night week
	weekend month year summer winter spring autumn fall monday tuesday wednesday thursday friday
	saturday sunday january february march april may june july august september october november december
	english french spanish german italian portuguese chinese japanese korean russian arabic hindi dutch
	swedish norwegian danish finnish polish turkish greek hebrew latin mandarin cantonese vietnamese thai
	json yaml xml csv markdown html pdf table list bullet paragraph essay tweet poem haiku letter summary
	formal casual informal polite friendly professional funny serious simple detailed
	train taxi bus car plane flight bike walk ferry boat subway metro
	male female man woman men women boy girl adult child baby
	why when where who should must might can`) {
		m[w] = true
	}
	return m
}()

var unitWords = func() map[string]bool {
	m := map[string]bool{}
	for _, u := range units {
		m[u] = true
	}
	return m
}()
