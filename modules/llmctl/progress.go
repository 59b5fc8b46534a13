package llmctl

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// pacing is how ctl shows a wait: after quiet without an answer, a line
// on stderr redrawn every redraw on a terminal, else a plain line every
// every; polls is how often a --wait asks again. The zero value is the
// default (1s, 250ms, 5s, 2s); tests set shorter ones.
type pacing struct {
	quiet, redraw, every, polls time.Duration
}

func (p pacing) or() pacing {
	return pacing{quiet: orDur(p.quiet, time.Second), redraw: orDur(p.redraw, 250*time.Millisecond),
		every: orDur(p.every, 5*time.Second), polls: orDur(p.polls, 2*time.Second)}
}

func orDur(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// waitNote is what a command says while a call waits: what it waits
// for, and a status read while it waits (such as the weights fetched so
// far); both optional.
type waitNote struct {
	what   string
	status func() string
}

// during shows on stderr how a wait gets on until the returned function
// is called: nothing for the first second, then one line redrawn in
// place on a terminal, or a plain line every few seconds otherwise.
func (c *ctl) during(what string, status func() string) (stop func()) {
	return showWait(c.errOut, c.pace, what, status)
}

// showWait is during, writing to w.
func showWait(w io.Writer, pace pacing, what string, status func() string) (stop func()) {
	p := pace.or()
	tty := isTerminal(w)
	done, finished := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		interval := p.every
		if tty {
			interval = p.redraw
		}
		t := time.NewTimer(p.quiet)
		defer t.Stop()
		shown := false
		for {
			select {
			case <-done:
				if shown && tty {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
			}
			line := fmt.Sprintf("%s: %s", what, time.Since(start).Round(time.Second))
			if status != nil {
				if s := status(); s != "" {
					line += "  " + s
				}
			}
			if tty {
				fmt.Fprint(w, "\r\033[K"+line)
			} else {
				fmt.Fprintln(w, line)
			}
			shown = true
			t.Reset(interval)
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-finished }) }
}

// peek GETs an admin path for a progress line: a short call of its own
// that never prints, whatever --output says.
func (c *ctl) peek(path string, out any) error {
	req, _, _, err := c.request("GET", path, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return fmt.Errorf("%s", resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// fetchStatus says how the weights fetches of a model ("": any) get
// on: percent of the bytes, and the rate.
func (c *ctl) fetchStatus(model string) string {
	var v llmapi.MirrorView
	if c.peek("/llm/mirror", &v) != nil {
		return ""
	}
	return transfersStatus(v.Transfers, model)
}

// transfersStatus sums the mirror's transfers of a model ("": every one).
func transfersStatus(ts []mirror.Progress, model string) string {
	var done, total int64
	var rate float64
	for _, t := range ts {
		if model == "" || t.Model == model || strings.HasPrefix(t.Model, model) {
			done, total, rate = done+t.Bytes, total+t.Total, rate+t.Rate
		}
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("fetching weights %.0f%% (%s of %s) at %s/s", 100*float64(done)/float64(total),
		humanize.IBytes(uint64(done)), humanize.IBytes(uint64(total)), humanize.IBytes(uint64(rate)))
}

// replicaStatus counts a model's replicas by state: "2 ready, 1 starting".
func (c *ctl) replicaStatus(model string) string {
	var m llmapi.ModelStatus
	if c.peek("/llm/models/"+url.PathEscape(model), &m) != nil {
		return ""
	}
	count := map[string]int{}
	var states []string
	for _, r := range m.Replicas {
		if count[r.State] == 0 {
			states = append(states, r.State)
		}
		count[r.State]++
	}
	var parts []string
	for _, s := range states {
		parts = append(parts, fmt.Sprintf("%d %s", count[s], s))
	}
	if len(parts) == 0 {
		return "no replicas yet"
	}
	return "replicas: " + strings.Join(parts, ", ")
}

// updateStatus is a version change's progress: the fetch, then the
// replicas being replaced.
func (c *ctl) updateStatus(model string) func() string {
	return func() string {
		if s := c.fetchStatus(""); s != "" {
			return s
		}
		return c.replicaStatus(model)
	}
}
