package kbeval

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llmkb/kbindex"
)

// floors are the least each configuration must reach: a little under
// what was measured, so a regression of the reader, the chunker or the
// index fails here. Keys are kind (recall@5, MRR; negatives: the share
// whose best score stays under negThreshold).
var floors = map[string]map[string][2]float64{
	"keywords":     {"all": {0.95, 0.85}, "fact": {0.95, 0.92}, "table": {0.95, 0.92}, "negative": {0.85, 0.85}},
	"hybrid":       {"all": {0.90, 0.80}, "fact": {0.95, 0.92}, "table": {0.90, 0.80}, "negative": {0.70, 0.70}},
	"keywords-200": {"all": {0.93, 0.86}, "fact": {0.95, 0.95}, "table": {0.95, 0.90}, "negative": {0.85, 0.85}},
	"hybrid-200":   {"all": {0.93, 0.85}, "fact": {0.95, 0.92}, "table": {0.95, 0.90}, "negative": {0.55, 0.55}},
}

// config is one way of indexing and searching the corpus.
type config struct {
	name      string
	chunking  kbindex.ChunkOptions
	embed     embedder
	threshold float64 // a best score under it means "nothing found"
}

// The threshold 0.4 is about 1 − e^(−1/2): by the keyword score's
// definition, a chunk under it matches less than half of what a chunk
// holding each of the question's words once would, so what it shares
// with the question is incidental. The same value is used for hybrid,
// whose scores the lexical sim embedder compresses (see the log).
var configs = []config{
	{"keywords", kbindex.ChunkOptions{}, nil, 0.4},
	{"hybrid", kbindex.ChunkOptions{}, simEmbed, 0.4},
	{"keywords-200", kbindex.ChunkOptions{MaxTokens: 200, OverlapTokens: 100}, nil, 0.4},
	{"hybrid-200", kbindex.ChunkOptions{MaxTokens: 200, OverlapTokens: 100}, simEmbed, 0.4},
}

// TestRetrievalQuality reads, chunks and indexes the evaluation corpus
// and asks it every question of testdata/questions.json, keywords alone
// and hybrid (vectors from the sim engine's lexical feature hashing, so
// the hybrid rows test the fusion's plumbing, not semantic recall), with
// the "auto" chunking and with 200-token chunks.
func TestRetrievalQuality(t *testing.T) {
	qs := loadQuestions(t)
	t.Logf("hybrid: vectors from engines/sim Embed (%d dims): signed feature hashing of words, a LEXICAL embedder; "+
		"it measures the fusion's plumbing, not semantic recall", simDims)
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-13s %-10s %3s %9s %10s %6s\n", "config", "kind", "n", "recall@5", "passage@5", "MRR")
	for _, cfg := range configs {
		c := loadCorpus(t, cfg.chunking)
		by, outs := c.run(c.index(cfg.embed), qs, cfg.embed, cfg.threshold)
		t.Logf("%s: %d files, %d bytes, %d chunks", cfg.name, len(c.pieces), c.bytes, c.chunks())
		for _, k := range kinds {
			s := by[k]
			if k == "negative" {
				fmt.Fprintf(&table, "%-13s %-10s %3d   best score under %.2f: %.2f (answerable at or over it: %.2f)\n",
					cfg.name, k, s.n, cfg.threshold, s.neg(), by["all"].kept())
				continue
			}
			fmt.Fprintf(&table, "%-13s %-10s %3d %9.3f %10.3f %6.3f\n", cfg.name, k, s.n, s.recall(), s.passage(), s.mrr())
		}
		logMisses(t, cfg, outs)
		logSeparation(t, cfg.name, outs)
		checkFloors(t, cfg.name, by)
	}
	t.Log(table.String())
}

func checkFloors(t *testing.T, cfg string, by map[string]*score) {
	for kind, f := range floors[cfg] {
		s := by[kind]
		got := [2]float64{s.recall(), s.mrr()}
		if kind == "negative" {
			got = [2]float64{s.neg(), s.neg()}
		}
		if got[0] < f[0] || got[1] < f[1] {
			t.Errorf("%s %s: got %.3f/%.3f, want at least %.3f/%.3f", cfg, kind, got[0], got[1], f[0], f[1])
		}
	}
}

// logMisses lists the questions whose relevant file is not in the first
// five results, and the negatives that score over the threshold.
func logMisses(t *testing.T, cfg config, outs []outcome) {
	for _, o := range outs {
		switch {
		case len(o.q.Files) == 0 && o.top >= cfg.threshold:
			t.Logf("%s: negative %q scores %.3f (%s)", cfg.name, o.q.Q, o.top, o.best)
		case len(o.q.Files) > 0 && (o.rank == 0 || o.rank > 5):
			t.Logf("%s: miss [%s] %q: %v at rank %d; first %s (%.3f)", cfg.name, o.q.Kind, o.q.Q, o.q.Files, o.rank, o.best, o.top)
		}
	}
}

// logSeparation shows how a threshold on the best score would split the
// answerable questions from the negatives.
func logSeparation(t *testing.T, cfg string, outs []outcome) {
	var pos, neg []float64
	for _, o := range outs {
		if len(o.q.Files) == 0 {
			neg = append(neg, o.top)
		} else {
			pos = append(pos, o.top)
		}
	}
	slices.Sort(pos)
	slices.Sort(neg)
	var b strings.Builder
	for _, th := range []float64{0.3, 0.4, 0.5, 0.6, 0.7} {
		fmt.Fprintf(&b, " %.1f: %d/%d answerable kept, %d/%d negatives dropped;", th, countAtLeast(pos, th), len(pos), len(neg)-countAtLeast(neg, th), len(neg))
	}
	t.Logf("%s: best score, negatives %.2f; answerable min %.2f median %.2f; thresholds%s", cfg, neg, pos[0], pos[len(pos)/2], b.String())
}

func countAtLeast(xs []float64, th float64) int {
	n := 0
	for _, x := range xs {
		if x >= th {
			n++
		}
	}
	return n
}

// TestAnswersInChunks checks the reader and the chunker on the corpus:
// every answer's text is whole in at least one chunk of a file that
// answers it, with either chunking.
func TestAnswersInChunks(t *testing.T) {
	qs := loadQuestions(t)
	for _, opt := range []kbindex.ChunkOptions{{}, {MaxTokens: 200, OverlapTokens: 100}} {
		c := loadCorpus(t, opt)
		for _, q := range qs {
			if len(q.Files) > 0 && !c.holds(q) {
				t.Errorf("chunking %+v: %q is in no chunk of %v (asked by %q)", opt, q.AnswerContains, q.Files, q.Q)
			}
		}
	}
}
