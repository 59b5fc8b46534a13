package llm

import (
	"github.com/llmgw/llmgw/modules/llm/place"
)

var node = &place.Ledger{}
