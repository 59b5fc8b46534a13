package llm

import (
	"time"
)

// now is the clock; tests may replace it.
var now = time.Now
