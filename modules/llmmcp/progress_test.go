package llmmcp

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSSETapCountsProgress feeds the tap event streams as servers write
// them, cut at every chunk size, and checks it counts exactly the progress
// notifications of calls it knows.
func TestSSETapCountsProgress(t *testing.T) {
	note := func(tok string, n int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%q,"progress":%d,"total":3}}`, tok, n)
	}
	big := strings.Repeat("x", maxTappedEvent)
	stream := strings.Join([]string{
		": keep-alive comment\n\n",
		"event: message\nid: 1_0\ndata: " + note("llmgw-a", 1) + "\n\n",
		"event: message\r\nid: 1_1\r\ndata:" + note("llmgw-a", 2) + "\r\n\r\n", // CRLF, no space after the colon
		"data: " + note("llmgw-b", 1) + "\n\n",
		"data: " + note("someone-else", 1) + "\n\n", // not a call of ours
		// one notification split over two data lines (the event's data joins them with a newline)
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\n" + `data: "params":{"progressToken":"llmgw-a","progress":3}}` + "\n\n",
		// a log message that mentions the method but is not progress
		`data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"sent notifications/progress"}}` + "\n\n",
		// too large to keep: passed by uncounted, and the stream after it still counted
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"llmgw-b\",\"message\":\"" + big + "\"}}\n\n",
		"data: " + note("llmgw-b", 2) + "\n\n",
		`data: {"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"notifications/progress"}]}}` + "\n\n",
	}, "")
	for _, chunk := range []int{1, 2, 3, 7, 64, 4096, len(stream)} {
		u := &upstream{}
		a, b := &progressCall{}, &progressCall{}
		u.progress.Store("llmgw-a", a)
		u.progress.Store("llmgw-b", b)
		tap := &sseTap{u: u}
		for s := stream; len(s) > 0; {
			n := min(chunk, len(s))
			tap.scan([]byte(s[:n]))
			s = s[n:]
		}
		if a.read.Load() != 3 || b.read.Load() != 2 {
			t.Errorf("chunks of %d: counted %d for a and %d for b, want 3 and 2", chunk, a.read.Load(), b.read.Load())
		}
	}
}

// TestTappedConnCountsBeforeTheResult checks the tap on a stdio-like
// connection (the SDK's line-delimited one, in memory): by the time a
// call returns, the tap has counted every notification sent before its
// result.
func TestTappedConnCountsBeforeTheResult(t *testing.T) {
	st, ct := mcp.NewInMemoryTransports()
	ss, err := upstreamMCPServer().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	u := &upstream{}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{ProgressNotificationHandler: u.onProgress}).
		Connect(context.Background(), tappedTransport{ct, u, nil}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i := range 20 {
		var forwarded atomic.Int64
		pc := &progressCall{forward: func(*mcp.ProgressNotificationParams) { forwarded.Add(1) }}
		tok := fmt.Sprintf("llmgw-%d", i)
		u.progress.Store(tok, pc)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 3}, Meta: mcp.Meta{"progressToken": tok}})
		if err != nil || res.IsError {
			t.Fatalf("%v %+v", err, res)
		}
		if n := pc.read.Load(); n != 3 {
			t.Fatalf("call %d: the tap had counted %d notifications when the result came, want 3", i, n)
		}
		pc.drain(context.Background())
		if n := forwarded.Load(); n != 3 {
			t.Fatalf("call %d: %d notifications forwarded after drain, want 3", i, n)
		}
		u.progress.Delete(tok)
	}
}

// TestProgressBeforeResultUnderLoad calls a tool that reports progress
// again and again while other goroutines keep both processors busy: every
// call's notifications must reach the client, none lost to its result.
func TestProgressBeforeResultUnderLoad(t *testing.T) {
	gw := testGateway(t, upstreamServer(t))
	var mu sync.Mutex
	got := map[string]int{}
	s, slow := progressClient(t, gw, func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		got[r.Params.ProgressToken.(string)]++
		mu.Unlock()
	})
	var stop atomic.Bool
	var burners sync.WaitGroup
	for range 2 * runtime.GOMAXPROCS(0) {
		burners.Go(func() {
			for x := 0; !stop.Load(); x++ {
				_ = make([]byte, 1<<10) // allocate too, so the collector runs
			}
		})
	}
	defer func() { stop.Store(true); burners.Wait() }()
	const calls = 40
	for i := range calls {
		tok := fmt.Sprintf("tok-%d", i)
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: slow, Arguments: map[string]any{"steps": 3}, Meta: mcp.Meta{"progressToken": tok}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
	}
	// the client's own SDK, too, may run its handler after the result
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		short := 0
		for i := range calls {
			if got[fmt.Sprintf("tok-%d", i)] != 3 {
				short++
			}
		}
		mu.Unlock()
		if short == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d calls reached the client with fewer than 3 progress notifications", short, calls)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// progressClient connects a client with a progress handler to the gateway
// at url, and names the upstream's slow tool (it sends progress).
func progressClient(t *testing.T, url string, h func(context.Context, *mcp.ProgressNotificationClientRequest)) (*mcp.ClientSession, string) {
	cl := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{ProgressNotificationHandler: h})
	s, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if strings.HasSuffix(tl.Name, "__slow") {
			return s, tl.Name
		}
	}
	t.Fatalf("the gateway lists no slow tool: %v", tools.Tools)
	return nil, ""
}
