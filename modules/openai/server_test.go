package openai

import (
	"context"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func TestApplyServerDefaults(t *testing.T) {
	for _, tc := range []struct {
		name       string
		srv        func() *caddyhttp.Server
		header     time.Duration
		minRate    int64
		readTime   time.Duration
		readIdleTO time.Duration
	}{
		{name: "unset", header: DefaultReadHeaderTimeout, minRate: DefaultReadMinRate},
		{name: "operator's header timeout", srv: func() *caddyhttp.Server { return &caddyhttp.Server{ReadHeaderTimeout: caddy.Duration(time.Hour)} },
			header: time.Hour, minRate: DefaultReadMinRate},
		{name: "operator's read_body", srv: func() *caddyhttp.Server { return &caddyhttp.Server{ReadTimeout: caddy.Duration(time.Hour)} },
			header: DefaultReadHeaderTimeout, readTime: time.Hour},
		{name: "operator's read_body_idle", srv: func() *caddyhttp.Server { return &caddyhttp.Server{ReadIdleTimeout: caddy.Duration(time.Hour)} },
			header: DefaultReadHeaderTimeout, readIdleTO: time.Hour},
		{name: "read_body_idle disabled", srv: func() *caddyhttp.Server { return &caddyhttp.Server{ReadIdleTimeout: -1} },
			header: DefaultReadHeaderTimeout, readIdleTO: -1},
		{name: "operator's min rate", srv: func() *caddyhttp.Server { return &caddyhttp.Server{ReadMinRate: 10} },
			header: DefaultReadHeaderTimeout, minRate: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := new(caddyhttp.Server)
			if tc.srv != nil {
				srv = tc.srv()
			}
			ApplyServerDefaults(caddy.Context{Context: context.WithValue(context.Background(), caddyhttp.ServerCtxKey, srv)}, nil)
			if time.Duration(srv.ReadHeaderTimeout) != tc.header || srv.ReadMinRate != tc.minRate ||
				time.Duration(srv.ReadTimeout) != tc.readTime || time.Duration(srv.ReadIdleTimeout) != tc.readIdleTO {
				t.Errorf("got read_header %v, min rate %d, read %v, read idle %v; want %v, %d, %v, %v",
					time.Duration(srv.ReadHeaderTimeout), srv.ReadMinRate, time.Duration(srv.ReadTimeout), time.Duration(srv.ReadIdleTimeout),
					tc.header, tc.minRate, tc.readTime, tc.readIdleTO)
			}
		})
	}
	ApplyServerDefaults(caddy.Context{Context: context.Background()}, nil) // outside a server: nothing to do
}
