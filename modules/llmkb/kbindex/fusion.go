package kbindex

import (
	"cmp"
	"slices"
)

// fusion merges keyword and vector results into one score in [0, 1].
//
// Two ways were measured on the labelled set of fusion_test.go (28
// English and German handbook passages, 25 queries: half share words or
// codes with their answer, half only paraphrase it or ask in the other
// language; vectors from a toy multilingual embedder with noise), by MRR:
//
//	keywords alone 0.667, vector alone 0.848
//	convex α·cosine + (1−α)·keyword: α 0.3 0.980, 0.4 0.980, 0.5–0.7 1.000
//	reciprocal rank fusion (k 10 or 60, scaled to [0, 1]): 0.953
//
// Convex fusion wins, and its score keeps a meaning a threshold can use
// (RRF's depends only on ranks). α = 0.5 is the middle of the plateau.
// TestFusionChoice fails if the default stops being the best tried.
type fusion struct {
	rrf   bool
	alpha float64 // convex: the weight of the vector's cosine
	k     float64 // rrf: the rank constant
}

var defaultFusion = fusion{alpha: 0.5}

// fuse scores the union of the two lists; kwOf and vecOf give a
// candidate's score of either kind, for those found by one list only.
func (fu fusion) fuse(kw, vec []found, kwOf, vecOf func(found) float64) []found {
	if fu.rrf {
		return fu.rrfFuse(kw, vec)
	}
	seen := make(map[fuseKey]bool, len(kw)+len(vec))
	out := make([]found, 0, len(kw)+len(vec))
	for _, list := range [][]found{kw, vec} {
		for _, f := range list {
			k := fuseKey{f.shard, f.doc}
			if seen[k] {
				continue
			}
			seen[k] = true
			f.score = fu.alpha*vecOf(f) + (1-fu.alpha)*kwOf(f)
			out = append(out, f)
		}
	}
	return out
}

// fuseKey names a chunk of a searched shard.
type fuseKey struct {
	shard int
	doc   uint32
}

// rrfFuse is reciprocal rank fusion, scaled so that first in both lists
// scores 1.
func (fu fusion) rrfFuse(kw, vec []found) []found {
	rank := func(list []found) map[fuseKey]int {
		slices.SortFunc(list, func(a, b found) int { return cmp.Compare(b.score, a.score) })
		m := make(map[fuseKey]int, len(list))
		for i, f := range list {
			m[fuseKey{f.shard, f.doc}] = i + 1
		}
		return m
	}
	rk, rv := rank(kw), rank(vec)
	out := make([]found, 0, len(kw)+len(vec))
	for li, list := range [][]found{kw, vec} {
		for _, f := range list {
			k := fuseKey{f.shard, f.doc}
			if _, dup := rk[k]; dup && li == 1 {
				continue // already scored from the keyword list
			}
			s := 0.0
			if r, ok := rk[k]; ok {
				s += 1 / (fu.k + float64(r))
			}
			if r, ok := rv[k]; ok {
				s += 1 / (fu.k + float64(r))
			}
			out = append(out, found{shard: f.shard, doc: f.doc, score: s * (fu.k + 1) / 2})
		}
	}
	return out
}
