package responsesapi

import (
	"encoding/json"

	"github.com/llmgw/llmgw/modules/openai"
)

// When the knowledge base searched for a request (Request.Retrieval), the
// response's output starts with a file_search_call item and the answer's
// text gets file_citation annotations by openai.Citer's rule.

// search adds the file_search_call item, first in the output, and
// prepares the citations of the message items that follow.
func (t *respTurn) search(o *respOut, rv *openai.Retrieval) *respItem {
	id := rv.CallID
	if id == "" {
		id = newID("fs_")
	}
	it := &respItem{kind: 's', id: jsonEscape(id), index: len(o.items), status: rv.Status}
	o.items = append(o.items, it)
	if it.status == "" {
		it.status = "completed"
	}
	b := append(make([]byte, 0, 256), `{"id":"`...)
	b = append(append(append(b, it.id...), `","type":"file_search_call","status":"`...), it.status...)
	b = append(b, `","queries":`...)
	if len(rv.Queries) == 0 {
		b = append(b, "[]"...)
	} else {
		q, _ := json.Marshal(rv.Queries)
		b = append(b, q...)
	}
	b = append(b, `,"results":`...)
	if t.withResults() {
		b = appendResults(b, rv.Results)
	} else {
		b = append(b, "null"...)
	}
	it.text = append(b, '}')
	return it
}

func appendResults(b []byte, results []openai.RetrievalResult) []byte {
	b = append(b, '[')
	for i := range results {
		if i > 0 {
			b = append(b, ',')
		}
		r, err := json.Marshal(&results[i])
		if err != nil { // an attribute JSON cannot hold: the result without them
			c := results[i]
			c.Attributes = nil
			r, _ = json.Marshal(&c)
		}
		b = append(b, r...)
	}
	return append(b, ']')
}

// appendSearchItem writes the file_search_call item: whole, or as it
// starts.
func (it *respItem) appendSearchItem(b []byte, full bool) []byte {
	if full {
		return append(b, it.text...)
	}
	b = append(append(append(b, `{"id":"`...), it.id...), `","type":"file_search_call","status":"in_progress","queries":[],"results":null}`...)
	return b
}

// retrieval returns what the knowledge base found for the turn, nil
// when it did not search.
func (t *respTurn) retrieval() *openai.Retrieval {
	if t.req == nil {
		return nil
	}
	return t.req.Retrieval
}

// withResults reports whether the client asked for the search results
// (include: ["file_search_call.results"]).
func (t *respTurn) withResults() bool {
	return t.req != nil && t.req.FileSearch != nil && t.req.FileSearch.IncludeResults
}
