package kbindex

import (
	"strings"
	"testing"
)

func mustFilter(t *testing.T, s string) *Filter {
	t.Helper()
	f, err := ParseFilter([]byte(s))
	if err != nil {
		t.Fatalf("ParseFilter(%s): %v", s, err)
	}
	return f
}

func TestFilterOperators(t *testing.T) {
	attrs := map[string]any{"region": "emea", "year": float64(2024), "count": 7, "draft": false, "date": "2024-05-01"}
	for _, c := range []struct {
		filter string
		want   bool
	}{
		{`{"type":"eq","key":"region","value":"emea"}`, true},
		{`{"type":"eq","key":"region","value":"apac"}`, false},
		{`{"type":"ne","key":"region","value":"apac"}`, true},
		{`{"type":"ne","key":"region","value":"emea"}`, false},
		{`{"type":"gt","key":"year","value":2023}`, true},
		{`{"type":"gt","key":"year","value":2024}`, false},
		{`{"type":"gte","key":"year","value":2024}`, true},
		{`{"type":"lt","key":"year","value":2024}`, false},
		{`{"type":"lt","key":"count","value":7.5}`, true}, // an int attribute
		{`{"type":"lte","key":"count","value":7}`, true},
		{`{"type":"gte","key":"date","value":"2024-01-01"}`, true}, // ISO dates as strings
		{`{"type":"lt","key":"date","value":"2024-01-01"}`, false},
		{`{"type":"in","key":"region","value":["apac","emea"]}`, true},
		{`{"type":"in","key":"region","value":["apac"]}`, false},
		{`{"type":"in","key":"year","value":[2023, 2024]}`, true},
		{`{"type":"nin","key":"region","value":["apac","emea"]}`, false},
		{`{"type":"nin","key":"region","value":["apac"]}`, true},
		{`{"type":"in","key":"region","value":"emea"}`, true}, // a single value for in
		{`{"type":"eq","key":"draft","value":false}`, true},
		{`{"type":"ne","key":"draft","value":true}`, true},
		// Type mismatches: false, and true for the negations.
		{`{"type":"eq","key":"year","value":"2024"}`, false},
		{`{"type":"gt","key":"region","value":5}`, false},
		{`{"type":"lt","key":"year","value":"9999"}`, false},
		{`{"type":"eq","key":"draft","value":0}`, false},
		{`{"type":"ne","key":"year","value":"2024"}`, true},
		{`{"type":"in","key":"year","value":["2024"]}`, false},
		// A missing key.
		{`{"type":"eq","key":"owner","value":"x"}`, false},
		{`{"type":"ne","key":"owner","value":"x"}`, true},
		{`{"type":"nin","key":"owner","value":["x"]}`, true},
		// Compounds, nested.
		{`{"type":"and","filters":[{"type":"eq","key":"region","value":"emea"},{"type":"gte","key":"year","value":2024}]}`, true},
		{`{"type":"and","filters":[{"type":"eq","key":"region","value":"emea"},{"type":"gt","key":"year","value":2024}]}`, false},
		{`{"type":"or","filters":[{"type":"eq","key":"region","value":"apac"},{"type":"eq","key":"draft","value":false}]}`, true},
		{`{"type":"or","filters":[{"type":"eq","key":"region","value":"apac"},{"type":"and","filters":[{"type":"eq","key":"draft","value":false},{"type":"lt","key":"year","value":2000}]}]}`, false},
		{`{"type":"and","filters":[{"type":"or","filters":[{"type":"eq","key":"region","value":"apac"},{"type":"in","key":"year","value":[2024]}]},{"type":"nin","key":"region","value":["amer"]}]}`, true},
	} {
		f := mustFilter(t, c.filter)
		if got := f.Match(attrs); got != c.want {
			t.Errorf("%s on %v = %v, want %v", c.filter, attrs, got, c.want)
		}
	}
	var none *Filter
	if !none.Match(nil) {
		t.Error("a nil filter must pass everything")
	}
}

func TestParseFilterErrors(t *testing.T) {
	for _, c := range []struct {
		filter, want string
	}{
		{`{"type":"like","key":"a","value":"b"}`, `filters.type: "like" is not a filter type; use one of eq, ne, gt, gte, lt, lte, in, nin, and, or`},
		{`{"key":"a","value":"b"}`, "filters.type: missing"},
		{`{"type":"and","filters":[{"type":"eq","key":"a","value":1},{"type":"eqq","key":"a","value":1}]}`, `filters.filters[1].type: "eqq" is not a filter type`},
		{`{"type":"or","filters":[{"type":"and","filters":[{"type":"eq","value":1}]}]}`, "filters.filters[0].filters[0].key: a comparison filter (eq) needs the attribute's name"},
		{`{"type":"and","filters":[]}`, "filters.filters: a compound filter (and) needs a non-empty array"},
		{`{"type":"eq","key":"a"}`, "filters.value: missing"},
		{`{"type":"eq","key":"a","value":{"x":1}}`, "filters.value: must be a string, number or boolean"},
		{`{"type":"gt","key":"a","value":true}`, "filters.value: gt compares numbers or strings, not a boolean"},
		{`{"type":"eq","key":"a","value":[1,2]}`, "filters.value: an array is for in and nin"},
		{`{"type":"in","key":"a","value":[1,null]}`, "filters.value[1]: must be a string, number or boolean"},
		{`{"type":"eq","key":"a","value":1,"extra":2}`, "filters.extra: unknown field of a comparison filter"},
		{`[1]`, "filters: must be an object with a type"},
		{`{"type":`, "filters: not valid JSON"},
		{strings.Repeat(`{"type":"and","filters":[`, 10) + `{"type":"eq","key":"a","value":1}` + strings.Repeat(`]}`, 10), "nest more than 8 deep"},
	} {
		_, err := ParseFilter([]byte(c.filter))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseFilter(%s) = %v, want an error with %q", c.filter, err, c.want)
		}
	}
	if f, err := ParseFilter(nil); f != nil || err != nil {
		t.Errorf("ParseFilter(nil) = %v, %v; want no filter", f, err)
	}
}
