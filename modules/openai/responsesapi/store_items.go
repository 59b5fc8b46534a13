package responsesapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/llmgw/llmgw/modules/openai"
)

// inputItems lists the input items of a stored response, as GET
// /v1/responses/{id}/input_items answers: the client's items, each with
// an id (derived from the response's id where the client gave none) and
// its content as parts.
func inputItems(respID string, input []byte, r *http.Request) ([]byte, *openai.Error) {
	q := r.URL.Query()
	limit := 20
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			return nil, &openai.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "limit",
				Message: "limit must be an integer from 1 to 100"}
		}
		limit = n
	}
	order := q.Get("order")
	if order != "" && order != "asc" && order != "desc" {
		return nil, &openai.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "order",
			Message: "order must be \"asc\" or \"desc\""}
	}
	items, ids := storedItems(strings.TrimPrefix(respID, "resp_"), input)
	if order != "asc" {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j], ids[i], ids[j] = items[j], items[i], ids[j], ids[i]
		}
	}
	start := 0
	if after := q.Get("after"); after != "" {
		for i, id := range ids {
			if id == after {
				start = i + 1
			}
		}
	}
	end := min(start+limit, len(items))
	out := append(make([]byte, 0, len(input)+128), `{"object":"list","data":[`...)
	for i := start; i < end; i++ {
		if i > start {
			out = append(out, ',')
		}
		out = append(out, items[i]...)
	}
	out = append(out, ']')
	if end > start {
		out = append(out, `,"first_id":"`+jsonEscape(ids[start])+`","last_id":"`+jsonEscape(ids[end-1])+`"`...)
	} else {
		out = append(out, `,"first_id":null,"last_id":null`...)
	}
	return append(out, `,"has_more":`+strconv.FormatBool(end < len(items))+`}`...), nil
}

// storedItems returns the input's items in the API's output shape, and
// their ids.
func storedItems(suffix string, input []byte) (items [][]byte, ids []string) {
	if openai.KindOf(input) == openai.KindString {
		id := "msg_" + suffix + "_0"
		item := `{"id":"` + id + `","type":"message","role":"user","status":"completed","content":[{"type":"input_text","text":` + string(input) + `}]}`
		return [][]byte{[]byte(item)}, []string{id}
	}
	_ = openai.EachElement(input, func(i int, v []byte) error {
		var id, typ, role string
		var content []byte
		_ = openai.EachMember(v, func(k, mv []byte) error {
			switch string(k) {
			case "id":
				id = openai.StringValue(mv)
			case "type":
				typ = openai.StringValue(mv)
			case "role":
				role = openai.StringValue(mv)
			case "content":
				content = mv
			}
			return nil
		})
		if typ == "" && role != "" {
			typ = "message"
		}
		if id == "" {
			id = fmt.Sprintf("%s_%s_%d", itemPrefix(typ), suffix, i)
		}
		item := append(make([]byte, 0, len(v)+len(id)+64), v...)
		item = setMember(item, "id", []byte(`"`+jsonEscape(id)+`"`))
		item = setMember(item, "type", []byte(`"`+jsonEscape(typ)+`"`))
		if typ == "message" && openai.KindOf(content) == openai.KindString {
			part := "input_text"
			if role == "assistant" {
				part = "output_text"
			}
			item = setMember(item, "content", []byte(`[{"type":"`+part+`","text":`+string(content)+`}]`))
		}
		items, ids = append(items, item), append(ids, id)
		return nil
	})
	return items, ids
}

func itemPrefix(typ string) string {
	switch typ {
	case "message":
		return "msg"
	case "function_call":
		return "fc"
	case "function_call_output":
		return "fco"
	case "reasoning":
		return "rs"
	case "file_search_call":
		return "fs"
	}
	return "item"
}

// setMember sets one member of a JSON object by splicing its bytes.
func setMember(obj []byte, key string, v []byte) []byte {
	out, err := openai.SetMember(obj, key, v)
	if err != nil {
		return obj
	}
	return out
}
