package llmctl

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"
)

// ctl is "llmgw ctl": its global flags, and where it prints.
type ctl struct {
	admin  string
	config string // a config file whose admin address is used when admin is empty
	from   string // where the address came from, once resolved
	json   bool   // print the answers (--output json or yaml), not tables
	output string // --output: table, json or yaml
	url    string // a site's llm_admin, where the /llm routes are
	token  string
	// timeout bounds one call; 0 is 30s. Commands that wait for replicas
	// to be replaced set a longer one.
	timeout time.Duration
	// note is what a call that waits says on stderr (during), and pace
	// how often.
	note waitNote
	pace pacing
	// out is where tables, messages and --json answers go (stdout);
	// errOut is for what a script should not read (stderr).
	out, errOut io.Writer
}

// endpoint returns the URL of an admin path (/llm/…), and the endpoint's
// name and a hint for errors: a site's llm_admin or the admin endpoint,
// found as addressOrder says.
func (c *ctl) endpoint(path string) (target, where, hint string, err error) {
	if err := c.resolve(); err != nil {
		return "", "", "", err
	}
	if c.url == "" {
		base := c.admin
		if !strings.Contains(base, "://") {
			base = "http://" + base
		}
		return base + path, "llmgw's admin endpoint at " + c.admin + " (from " + c.from + ")", "is llmgw running, and is --admin right?", nil
	}
	base := strings.TrimSuffix(c.url, "/")
	if u, err := url.Parse(base); err == nil && u.Path == "" {
		base += "/llm"
	}
	return base + strings.TrimPrefix(path, "/llm"), "llm_admin at " + c.url + " (from " + c.from + ")", "is --url right (the address of the site's /llm routes)?", nil
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// call sends a request to the admin endpoint and decodes the answer into
// out (when not nil); admin errors come back with their message. With
// --output json or yaml the answer is printed too, as it came.
func (c *ctl) call(method, path string, body any, out any) error {
	req, where, hint, err := c.request(method, path, body)
	if err != nil {
		return err
	}
	timeout := c.timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	stop := func() {}
	if c.note.what != "" || isTerminal(c.errOut) {
		// A plain call shows how long it waits on a terminal only, so
		// that a script's stderr holds nothing but errors.
		stop = c.during(cmp.Or(c.note.what, method+" "+path), c.note.status)
	}
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	stop()
	if err != nil {
		return fmt.Errorf("reaching %s: %w; %s", where, err, hint)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var e struct{ Error string }
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s%s", e.Error, hostHint(e.Error, c.admin))
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(raw))
	}
	if c.json {
		if err := emit(c.out, c.output, raw); err != nil {
			return err
		}
	}
	if out != nil && len(raw) > 0 { // with --output too: a command checks what failed
		return json.Unmarshal(raw, out)
	}
	return nil
}

// read GETs path into out whatever --json says: for what a command needs
// to know before the change it prints.
func (c *ctl) read(path string, out any) error {
	asJSON := c.json
	c.json = false
	defer func() { c.json = asJSON }()
	return c.call("GET", path, nil, out)
}

// request builds a call's request: the JSON body, the OS user as the
// actor, and the token, which never crosses the network in plain http.
// where and hint name the endpoint for errors.
// rawBody is a request body sent as it is, not as JSON.
type rawBody struct {
	contentType string
	data        []byte
}

func (c *ctl) request(method, path string, body any) (req *http.Request, where, hint string, err error) {
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case rawBody:
		rd, ctype = bytes.NewReader(b.data), b.contentType
	default:
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	target, where, hint, err := c.endpoint(path)
	if err != nil {
		return nil, "", "", err
	}
	req, err = http.NewRequest(method, target, rd)
	if err != nil {
		return nil, "", "", err
	}
	req.Header.Set("Content-Type", ctype)
	if a := actor(); a != "" {
		req.Header.Set("X-Llmgw-Actor", a)
	}
	token := c.token
	if token == "" {
		token = os.Getenv("LLMGW_ADMIN_TOKEN")
	}
	if token != "" {
		if u := req.URL; u.Scheme == "http" && !loopback(u.Hostname()) {
			return nil, "", "", fmt.Errorf("--url %s is plain http: the token would cross the network readable; use https://", c.url)
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, where, hint, nil
}

// actor is who makes a change, for the audit log: the person who ran
// sudo (SUDO_USER) when ctl runs under sudo, else the OS user.
func actor() string {
	if s := os.Getenv("SUDO_USER"); s != "" {
		return s
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// hostHint says what to change when Caddy's admin endpoint refused the
// Host it was reached by: on a loopback address it accepts only
// localhost, 127.0.0.1 and ::1 unless its origins list the address.
func hostHint(msg, admin string) string {
	if !strings.HasPrefix(msg, "host not allowed") {
		return ""
	}
	return fmt.Sprintf("; Caddy's admin endpoint accepts only the hosts its origins list (by default, on a loopback address: localhost, 127.0.0.1 and ::1): "+
		"list this one in the config's admin option (admin %s { origins %s }), or listen on 127.0.0.1", admin, admin)
}

// print writes v in the --output format (json or yaml).
func (c *ctl) print(v any) error { return printValue(c.out, c.output, v) }

// table prints rows under a header, in columns.
func (c *ctl) table(header string, rows [][]string) {
	printTable(c.out, header, rows)
}

// printTable writes rows under a header to w, in columns two spaces apart.
func printTable(w io.Writer, header string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}
