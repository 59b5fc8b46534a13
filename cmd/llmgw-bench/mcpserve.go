package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmgw/llmgw/modules/llmmcp/oauthtest"
)

// mcpServe is "llmgw-bench mcp-serve": a small MCP server for tests and
// benchmarks, over stdio or Streamable HTTP (and the old SSE transport at
// /sse). Tools: echo, add, slow (streams progress), fail (a tool error),
// contact (a result with an email address and a phone number), whoami
// (the Authorization header it got), grow (adds a tool); one resource (note://<name>/readme) and one prompt
// (greet). With -crash-after N the process exits during its Nth tool call.
// With -oauth the endpoints want an OAuth bearer token from the
// authorization server it runs beside them (see package oauthtest).
func mcpServe(args []string) error {
	fs := flag.NewFlagSet("mcp-serve", flag.ExitOnError)
	stdio := fs.Bool("stdio", false, "serve on stdin/stdout")
	listen := fs.String("listen", "", "serve Streamable HTTP at / (and SSE at /sse) on this address")
	crashAfter := fs.Int64("crash-after", 0, "exit during the Nth tool call (0: never)")
	name := fs.String("name", "mcp-serve", "the server's name in its initialize answer")
	withOAuth := fs.Bool("oauth", false, "with -listen: also run an OAuth authorization server (a stand-in consent page, DCR, PKCE, refresh and client_credentials grants) and require its bearer tokens at / and /sse")
	tokenTTL := fs.Duration("token-ttl", time.Hour, "with -oauth: the access tokens' lifetime")
	clientID := fs.String("client-id", "", "with -oauth: a preregistered client's id")
	clientSecret := fs.String("client-secret", "", "with -oauth: the preregistered client's secret")
	_ = fs.Parse(args)
	s := newMCPServer(*name, *crashAfter)
	switch {
	case *stdio:
		return s.Run(context.Background(), &mcp.StdioTransport{})
	case *listen != "":
		mux := http.NewServeMux()
		var sse, streamable http.Handler = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil),
			mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		if *withOAuth {
			as := oauthtest.New(oauthtest.Options{Base: "http://" + *listen, TokenTTL: *tokenTTL, ClientID: *clientID, ClientSecret: *clientSecret})
			as.Handle(mux)
			sse, streamable = as.Protect(sse), as.Protect(streamable)
		}
		mux.Handle("/sse", sse)
		mux.Handle("/", streamable)
		return http.ListenAndServe(*listen, mux)
	}
	return errors.New("give -stdio or -listen <addr>")
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type addArgs struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type slowArgs struct {
	Steps int `json:"steps" jsonschema:"how many progress notifications to send"`
	MS    int `json:"ms" jsonschema:"milliseconds between them"`
}

func newMCPServer(name string, crashAfter int64) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	var calls atomic.Int64
	count := func() {
		if n := calls.Add(1); crashAfter > 0 && n >= crashAfter {
			fmt.Fprintf(os.Stderr, "mcp-serve: crashing on tool call %d as asked\n", n)
			os.Exit(3)
		}
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes its text"}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		count()
		return text(a.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "adds a and b"}, func(_ context.Context, _ *mcp.CallToolRequest, a addArgs) (*mcp.CallToolResult, any, error) {
		count()
		return text(fmt.Sprint(a.A + a.B)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "takes steps*ms milliseconds, sending a progress notification per step"}, func(ctx context.Context, req *mcp.CallToolRequest, a slowArgs) (*mcp.CallToolResult, any, error) {
		count()
		tok := req.Params.GetProgressToken()
		for i := 1; i <= a.Steps; i++ {
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(time.Duration(a.MS) * time.Millisecond):
			}
			if tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(a.Steps), Message: fmt.Sprintf("step %d", i)})
			}
		}
		return text(fmt.Sprintf("done after %d steps", a.Steps)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "always answers with a tool error"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		count()
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the ticket system is read-only today"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "contact", Description: "looks up a person's contact details"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		count()
		return text("Ada Lovelace, ada.lovelace@example.com, +1 415 555 0134"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "mailcheck", Description: "says whether text is a deliverable email address, and its domain"}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		count()
		at := strings.LastIndexByte(a.Text, '@')
		if at <= 0 || !strings.Contains(a.Text[at:], ".") || strings.ContainsAny(a.Text, " <>") {
			return text("not an email address"), nil, nil
		}
		return text("deliverable, domain " + a.Text[at+1:]), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "says which Authorization header reached the server"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		count()
		auth := "none"
		if req.Extra != nil && req.Extra.Header != nil && req.Extra.Header.Get("Authorization") != "" {
			auth = req.Extra.Header.Get("Authorization")
		}
		return text(auth), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "adds the tool grown (which echoes), so clients get tools/list_changed"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		count()
		mcp.AddTool(s, &mcp.Tool{Name: "grown", Description: "echoes its text"}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return text(a.Text), nil, nil
		})
		return text("grown"), nil, nil
	})
	s.AddResource(&mcp.Resource{Name: "readme", URI: "note://" + name + "/readme", MIMEType: "text/plain"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "served by " + name}}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "greets someone", Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + req.Params.Arguments["who"]}}}}, nil
	})
	return s
}
