package llmgw

import (
	"strconv"
	"strings"
)

// devicesCol shows a replica's GPU devices in a table: 0,1, or - for none.
func devicesCol(ds []int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = strconv.Itoa(d)
	}
	return strings.Join(s, ",")
}
