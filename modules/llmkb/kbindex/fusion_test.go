package kbindex

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// The labelled set: passages of an employee handbook (English and
// German), and queries with the passage that answers them. Half the
// queries share words with their answer (codes, names, the handbook's
// own terms: keywords find them), half only paraphrase it, or ask in the
// other language (an embedder finds them).
var labelledDocs = []string{
	"Company cars may be used for private trips if the driver pays the fuel and logs every journey in the fleet app FLT-7.",
	"Dienstwagen dürfen privat genutzt werden; der geldwerte Vorteil wird monatlich mit einem Prozent des Listenpreises versteuert.",
	"Hotel nights are reimbursed up to 180 EUR in Berlin and 240 EUR in London; book through the portal TRAVELDESK.",
	"Übernachtungskosten werden bis zur Höchstgrenze des Reiseziels erstattet; Belege sind im Original einzureichen.",
	"Annual leave is 30 days; unused days expire on 31 March of the following year unless HR approves a carry-over.",
	"Der Urlaubsanspruch beträgt 30 Tage; Resturlaub verfällt am 31. März des Folgejahres.",
	"Employees who are ill must notify their manager before 9 a.m. and send a doctor's note from the third day.",
	"Bei Krankheit ist die Führungskraft vor 9 Uhr zu informieren; ab dem dritten Tag ist eine Arbeitsunfähigkeitsbescheinigung vorzulegen.",
	"Reset your password at https://id.example.com; codes are sent to the phone number stored in the directory.",
	"Das Passwort wird über das Self-Service-Portal zurückgesetzt; der Code wird per SMS zugestellt.",
	"Salaries are paid on the 25th of each month; payslips are available in the HR portal PAYVIEW.",
	"Das Gehalt wird am 25. jedes Monats überwiesen; Gehaltsabrechnungen stehen im Portal bereit.",
	"Laptops are replaced every three years; a broken notebook is swapped at the IT desk on floor 2 within one day.",
	"Meals on business trips are covered by a daily allowance of 28 EUR, reduced when breakfast is included.",
	"Verpflegungsmehraufwand wird nach den steuerlichen Pauschalen erstattet.",
	"Trains are preferred over planes for journeys under four hours; first class is allowed above two hours.",
	"Für Flüge unter sechs Stunden gilt die Economy-Klasse; Ausnahmen genehmigt die Bereichsleitung.",
	"Parking in the garage under building B costs 2 EUR a day and is free for car-sharing members.",
	"Parents may take up to 36 months of parental leave per child; the first 12 months are paid by the state.",
	"Mobiles Arbeiten ist an bis zu drei Tagen pro Woche möglich, sofern die Aufgaben es zulassen.",
	"Working from home is allowed three days a week; the company pays 20 EUR a month towards internet costs.",
	"Security incidents, such as a lost badge or phishing e-mail, are reported to the SOC hotline 4455 at once.",
	"Sicherheitsvorfälle wie ein verlorener Ausweis sind sofort der Sicherheitsabteilung zu melden.",
	"Expense claims older than ninety days are rejected; submit them in the tool EXPENSO within thirty days.",
	"Conference fees are paid when the event is relevant to the role and approved in advance by the manager.",
	"The canteen serves lunch from 11:30 to 14:00; vegetarian dishes are marked with a green leaf.",
	"Die Kantine ist montags bis freitags von 11:30 bis 14:00 Uhr geöffnet.",
	"Mobile phones are provided to staff on call; private use is allowed within the flat-rate plan.",
}

var labelledQueries = []struct {
	q    string
	want []int // passages that answer it
}{
	// Sharing words (and codes) with the answer.
	{"fleet app FLT-7", []int{0}},
	{"TRAVELDESK hotel booking", []int{2}},
	{"PAYVIEW payslips", []int{10}},
	{"SOC hotline 4455", []int{21}},
	{"EXPENSO claims", []int{23}},
	{"Resturlaub verfällt", []int{5}},
	{"Arbeitsunfähigkeitsbescheinigung", []int{7}},
	{"parking garage building B", []int{17}},
	{"canteen vegetarian", []int{25}},
	{"conference fees", []int{24}},
	{"parental leave months", []int{18}},
	{"Economy-Klasse Flüge", []int{16}},
	// Paraphrases, and the other language.
	{"can I drive the company vehicle on weekends", []int{0, 1}},
	{"how much does the firm refund for accommodation", []int{2, 3}},
	{"when do my holidays run out", []int{4, 5}},
	{"what to do when I am sick", []int{6, 7}},
	{"forgot my login credentials", []int{8, 9}},
	{"wann wird der Lohn gezahlt", []int{10, 11}},
	{"my computer is broken", []int{12}},
	{"food allowance on a trip", []int{13, 14}},
	{"rail or fly", []int{15, 16}},
	{"telework days", []int{19, 20}},
	{"Zugang verloren melden", []int{21, 22}},
	{"where is lunch served", []int{25, 26}},
	{"smartphone for work", []int{27}},
}

// concepts is the toy embedder's knowledge: words of one meaning, in
// either language, share a direction.
var concepts = [][]string{
	{"car", "cars", "vehicle", "vehicles", "auto", "dienstwagen", "fahrzeug", "drive", "driver", "fleet"},
	{"private", "privat", "weekends", "personal"},
	{"refund", "reimbursed", "reimburse", "erstattet", "erstattung", "covered", "paid", "pays", "pay"},
	{"hotel", "accommodation", "übernachtungskosten", "übernachtung", "nights", "lodging"},
	{"leave", "holidays", "holiday", "urlaub", "urlaubsanspruch", "resturlaub", "vacation"},
	{"expire", "verfällt", "run", "out", "lapse"},
	{"ill", "sick", "krankheit", "krank", "doctor's", "arbeitsunfähigkeitsbescheinigung"},
	{"password", "passwort", "login", "credentials", "reset", "zurückgesetzt", "forgot"},
	{"salaries", "salary", "gehalt", "lohn", "payslips", "gehaltsabrechnungen", "wage"},
	{"laptops", "laptop", "notebook", "computer", "rechner"},
	{"broken", "kaputt", "defekt", "swapped", "replaced"},
	{"meals", "meal", "food", "verpflegungsmehraufwand", "breakfast", "lunch", "essen"},
	{"allowance", "pauschalen", "pauschale", "daily"},
	{"trips", "trip", "journeys", "business", "reise", "reiseziels", "travel"},
	{"trains", "train", "rail", "bahn", "zug"},
	{"planes", "plane", "fly", "flüge", "flug", "flights", "economy-klasse"},
	{"parking", "garage", "parkplatz"},
	{"parents", "parental", "child", "kinder", "elternzeit"},
	{"home", "mobiles", "arbeiten", "telework", "remote", "homeoffice", "working"},
	{"security", "sicherheitsvorfälle", "sicherheitsabteilung", "incidents", "phishing"},
	{"badge", "ausweis", "zugang", "lost", "verlorener", "verloren"},
	{"reported", "melden", "notify", "informieren"},
	{"canteen", "kantine", "served", "serves", "geöffnet"},
	{"phones", "phone", "smartphone", "handy", "mobile", "sms"},
	{"when", "wann"},
	{"days", "tage", "tagen", "week", "woche"},
}

// toyEmbedder turns a text into a 384-dim vector: the sum of its words'
// concept directions (unknown words get a weaker direction of their own),
// with noise, as an imperfect multilingual embedder would.
type toyEmbedder struct {
	concept map[string]int
	rng     *rand.Rand
}

func newToyEmbedder() *toyEmbedder {
	e := &toyEmbedder{concept: map[string]int{}, rng: rand.New(rand.NewPCG(7, 7))}
	for i, c := range concepts {
		for _, w := range c {
			e.concept[w] = i
		}
	}
	return e
}

func direction(seed uint64, dims int) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	return randVec(r, dims)
}

func (e *toyEmbedder) embed(text string) []float32 {
	const dims = 384
	v := make([]float32, dims)
	for _, w := range words(text, nil) {
		if isStop(w, langBoth) {
			continue
		}
		seed, weight := uint64(0), float32(0.25)
		if c, ok := e.concept[w]; ok {
			seed, weight = uint64(c), 1
		} else {
			h := fnv.New64a()
			h.Write([]byte(w))
			seed = h.Sum64()
		}
		d := direction(seed, dims)
		for i := range v {
			v[i] += weight * d[i]
		}
	}
	for i := range v {
		v[i] += float32(1.5 * e.rng.NormFloat64())
	}
	return v
}

type evalResult struct {
	mrr, recall5 float64
}

// evaluate runs the labelled set through an index with the fusion given.
func evaluate(fu fusion, useText, useVec bool) evalResult {
	e := newToyEmbedder()
	ix := New()
	ix.fusion = fu
	var es []Entry
	for i, d := range labelledDocs {
		es = append(es, Entry{Ref: ref("s", fmt.Sprintf("f%02d", i), 0), Text: d, Vector: e.embed(d)})
	}
	ix.Add(es)
	var res evalResult
	for _, lq := range labelledQueries {
		q := Query{Stores: []string{"s"}, Limit: 10}
		if useText {
			q.Text = lq.q
		}
		if useVec {
			q.Vector = e.embed(lq.q)
		}
		for rank, h := range ix.Search(q) {
			var n int
			fmt.Sscanf(h.Ref.File, "f%d", &n)
			if contains(lq.want, n) {
				res.mrr += 1 / float64(rank+1)
				if rank < 5 {
					res.recall5++
				}
				break
			}
		}
	}
	res.mrr /= float64(len(labelledQueries))
	res.recall5 /= float64(len(labelledQueries))
	return res
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// TestFusionChoice measures keyword, vector and fused search on the
// labelled set, and fails when the default fusion is not the best of
// those tried (by MRR, within 0.01).
func TestFusionChoice(t *testing.T) {
	type run struct {
		name string
		r    evalResult
	}
	runs := []run{
		{"keywords alone", evaluate(defaultFusion, true, false)},
		{"vector alone", evaluate(defaultFusion, false, true)},
	}
	var fused []run
	for _, a := range []float64{0.3, 0.4, 0.5, 0.6, 0.7} {
		fused = append(fused, run{fmt.Sprintf("convex α=%.1f", a), evaluate(fusion{alpha: a}, true, true)})
	}
	for _, k := range []float64{10, 60} {
		fused = append(fused, run{fmt.Sprintf("rrf k=%.0f", k), evaluate(fusion{rrf: true, k: k}, true, true)})
	}
	def := evaluate(defaultFusion, true, true)
	var b strings.Builder
	best := 0.0
	for _, r := range append(runs, fused...) {
		fmt.Fprintf(&b, "\n%-16s MRR %.3f  recall@5 %.3f", r.name, r.r.mrr, r.r.recall5)
	}
	for _, r := range fused {
		best = math.Max(best, r.r.mrr)
	}
	t.Logf("%d queries, %d passages:%s\ndefault: MRR %.3f", len(labelledQueries), len(labelledDocs), b.String(), def.mrr)
	if def.mrr < best-0.01 {
		t.Errorf("the default fusion has MRR %.3f, the best tried %.3f: change defaultFusion", def.mrr, best)
	}
}
