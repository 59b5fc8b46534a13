package responsesapi

import (
	"fmt"
	"strconv"

	"github.com/llmgw/llmgw/modules/openai"
)

// The file_search tool: the gateway searches its own knowledge bases
// (the handler that serves them reads Request.FileSearch and sets
// Request.Retrieval) and gives the passages to whatever model answers,
// so the tool never reaches the model as a chat tool.

// Bounds of the file_search tool. OpenAI documents max_num_results 1 to
// 50; it documents no bound on vector_store_ids (its service refuses
// more than 2 at run time), and a gateway that searches its own
// knowledge bases takes up to 10.
const (
	maxVectorStores  = 10
	maxSearchResults = 50
	maxFilterDepth   = 8
)

// includeSearchResults is the include value that asks for the search
// results in the file_search_call item.
const includeSearchResults = "file_search_call.results"

// readFileSearch reads a file_search tool at tools[i] (the path at).
func readFileSearch(at string, tool []byte) (*openai.FileSearch, error) {
	fs := &openai.FileSearch{}
	hasIDs := false
	err := openai.EachMember(tool, func(key, v []byte) error {
		if openai.KindOf(v) == openai.KindNull {
			return nil
		}
		switch k := string(key); k {
		case "vector_store_ids":
			hasIDs = true
			return readVectorStores(at+"."+k, v, fs)
		case "max_num_results":
			n, err := openai.ReadInt(at+"."+k, v, 1, maxSearchResults)
			fs.MaxNumResults = int(n)
			return err
		case "filters":
			fs.Filters = openai.Compact(v)
			return checkFilter(at+"."+k, v, 0)
		case "ranking_options":
			return readRanking(at+"."+k, v, fs)
		}
		return nil
	})
	if err == nil && !hasIDs {
		err = respMissing(at+".vector_store_ids", "an array of 1 to 10 knowledge base ids, such as [\"vs_docs\"]")
	}
	return fs, err
}

func readVectorStores(at string, v []byte, fs *openai.FileSearch) error {
	const want = "an array of 1 to 10 knowledge base ids, such as [\"vs_docs\"]"
	if openai.KindOf(v) != openai.KindArray {
		return openai.TypeError(at, want)
	}
	err := openai.EachElement(v, func(j int, id []byte) error {
		if openai.KindOf(id) != openai.KindString || len(id) == 2 {
			return openai.TypeError(fmt.Sprintf("%s[%d]", at, j), "a non-empty string (a knowledge base's id)")
		}
		if len(fs.VectorStoreIDs) == maxVectorStores {
			return openai.RangeError(at, fmt.Sprintf("%s (it has %d); search fewer knowledge bases in one request", want, openai.CountElements(v)))
		}
		fs.VectorStoreIDs = append(fs.VectorStoreIDs, openai.StringValue(id))
		return nil
	})
	if err == nil && len(fs.VectorStoreIDs) == 0 {
		err = openai.RangeError(at, want+", not an empty array")
	}
	return err
}

// readRanking reads ranking_options: score_threshold (0 to 1) and ranker
// ("auto" or "default-2024-11-15", which rank alike here); hybrid_search
// is accepted and has no effect.
func readRanking(at string, v []byte, fs *openai.FileSearch) error {
	if openai.KindOf(v) != openai.KindObject {
		return openai.TypeError(at, "an object such as {\"score_threshold\":0.5}")
	}
	return openai.EachMember(v, func(key, mv []byte) error {
		if openai.KindOf(mv) == openai.KindNull {
			return nil
		}
		switch k := string(key); k {
		case "score_threshold":
			if err := checkFloat(at+"."+k, mv, 0, 1); err != nil {
				return err
			}
			fs.ScoreThreshold, _ = strconv.ParseFloat(string(mv), 64)
		case "ranker":
			return openai.CheckEnum(at+"."+k, mv, "auto", "default-2024-11-15")
		case "hybrid_search":
			if openai.KindOf(mv) != openai.KindObject {
				return openai.TypeError(at+"."+k, "an object such as {\"embedding_weight\":1,\"text_weight\":1}")
			}
		}
		return nil
	})
}

// checkFilter checks a filter on the files' attributes as OpenAI shapes
// it: a comparison {"type":"eq","key":…,"value":…} or a compound
// {"type":"and","filters":[…]}.
func checkFilter(at string, v []byte, depth int) error {
	if openai.KindOf(v) != openai.KindObject {
		return openai.TypeError(at, "an object such as {\"type\":\"eq\",\"key\":\"lang\",\"value\":\"en\"}")
	}
	typ := openai.MemberOf(v, "type")
	switch openai.StringValue(typ) {
	case "eq", "ne", "gt", "gte", "lt", "lte", "in", "nin":
		if k := openai.MemberOf(v, "key"); openai.KindOf(k) != openai.KindString {
			return filterMember(at+".key", k, "a string (an attribute's name)")
		}
		switch val := openai.MemberOf(v, "value"); openai.KindOf(val) {
		case openai.KindString, openai.KindNumber, openai.KindBool, openai.KindArray:
		default:
			return filterMember(at+".value", val, "a string, number, boolean or array")
		}
		return nil
	case "and", "or":
		if depth >= maxFilterDepth {
			return openai.RangeError(at, fmt.Sprintf("a filter nested at most %d deep", maxFilterDepth))
		}
		fs := openai.MemberOf(v, "filters")
		if openai.KindOf(fs) != openai.KindArray {
			return filterMember(at+".filters", fs, "an array of filters")
		}
		return openai.EachElement(fs, func(j int, f []byte) error {
			return checkFilter(fmt.Sprintf("%s.filters[%d]", at, j), f, depth+1)
		})
	}
	if typ == nil {
		return respMissing(at+".type", `one of "eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "and" or "or"`)
	}
	return openai.CheckEnum(at+".type", typ, "eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "and", "or")
}

// filterMember is the error of a filter's member v that is missing or
// has the wrong type.
func filterMember(at string, v []byte, want string) error {
	if openai.KindOf(v) == openai.KindNull {
		return respMissing(at, want)
	}
	return openai.TypeError(at, want)
}

// readInclude reads include: an array of strings, of which only
// file_search_call.results has an effect here.
func readInclude(p *respParams, v []byte) error {
	if openai.KindOf(v) != openai.KindArray {
		return openai.TypeError("include", "an array of strings such as [\"file_search_call.results\"]")
	}
	return openai.EachElement(v, func(j int, s []byte) error {
		if openai.KindOf(s) != openai.KindString {
			return openai.TypeError(fmt.Sprintf("include[%d]", j), "a string")
		}
		if openai.StringValue(s) == includeSearchResults {
			p.includeResults = true
		}
		return nil
	})
}

// settleFileSearch decides, once all members are read, what the
// file_search tool and tool_choice become: tool_choice "none" means no
// search; with the tool present the search always runs, so
// {"type":"file_search"} and "required" are met by it, and the model
// gets tool_choice "auto" for its function tools, or none at all when
// it has none.
func (p *respParams) settleFileSearch() error {
	if p.choice == choiceFileSearch && p.fileSearch == nil {
		return &openai.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "tool_choice",
			Message: "tool_choice {\"type\":\"file_search\"} needs a file_search tool in tools; add one, or use \"auto\""}
	}
	if !p.hasFileSearch {
		return nil
	}
	switch {
	case p.chatTools == nil:
		p.chatToolChoice = nil
	case p.choice == choiceRequired || p.choice == choiceFileSearch:
		p.chatToolChoice = []byte(`"auto"`)
	}
	if p.choice == choiceNone {
		p.fileSearch = nil
		return nil
	}
	p.fileSearch.IncludeResults = p.includeResults
	return nil
}
