package llm

import (
	"sync/atomic"

	"github.com/llmgw/llmgw/modules/llm/place"
)

var owners atomic.Pointer[place.OwnerTable]
