package llmctl

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// kbReadable are the file types llm_kb reads.
var kbReadable = []string{".pdf", ".docx", ".html", ".htm", ".md", ".markdown", ".txt"}

// kbLocal is a file to upload: its path, and the name it is shown by.
type kbLocal struct {
	path, name string
	size       int64
}

// kbAdd is ctl kb add.
func (c *ctl) kbAdd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{Use: "add STORE PATH...", Short: "Uploads files, and the readable files of folders (recursively: " + strings.Join(kbReadable, " ") + "), into a knowledge base; waits until they are read and prints each failure's reason", Args: cobra.MinimumNArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			id, err := c.kbStoreID(args[0])
			if err != nil {
				return err
			}
			files, err := kbCollect(args[1:])
			if err != nil {
				return err
			}
			p := newKBProgress(c, files)
			uploaded := map[string]string{}
			for i, f := range files {
				kf, err := c.kbUpload(id, f, p)
				if err != nil {
					p.stop()
					return fmt.Errorf("uploading %s: %w (the %d files before it are in the knowledge base)", f.path, err, i)
				}
				uploaded[kf.ID] = f.name
				p.uploaded(f, kf.ID)
			}
			p.stop()
			return c.kbWait(id, uploaded, timeout)
		}}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long to wait for the files to be read, chunked and embedded")
	return cmd
}

// kbCollect lists the files of paths: a file as given (of a readable
// type), a folder's readable files below it, hidden folders left out.
func kbCollect(paths []string) ([]kbLocal, error) {
	var files []kbLocal
	for _, root := range paths {
		fi, err := os.Stat(root)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			if !slices.Contains(kbReadable, strings.ToLower(filepath.Ext(root))) {
				return nil, fmt.Errorf("%s: llm_kb reads %s files; this is none of them", root, strings.Join(kbReadable, " "))
			}
			files = append(files, kbLocal{path: root, name: filepath.Base(root), size: fi.Size()})
			continue
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && p != root && strings.HasPrefix(d.Name(), "."):
				return filepath.SkipDir
			case !d.Type().IsRegular() || !slices.Contains(kbReadable, strings.ToLower(filepath.Ext(p))):
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			files = append(files, kbLocal{path: p, name: filepath.ToSlash(rel), size: info.Size()})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no file llm_kb reads (%s) in %s", strings.Join(kbReadable, " "), strings.Join(paths, " "))
	}
	return files, nil
}

// kbUpload sends one file as a multipart body, streamed from the disk,
// telling p how far it got.
func (c *ctl) kbUpload(store string, f kbLocal, p *kbProgress) (llmapi.KBFile, error) {
	var out llmapi.KBFile
	fh, err := os.Open(f.path)
	if err != nil {
		return out, err
	}
	defer fh.Close()
	p.start(f)
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", filepath.Base(f.path))
		if err == nil {
			_, err = io.Copy(part, io.TeeReader(fh, p))
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	defer pr.Close()
	path := "/llm/kb/stores/" + url.PathEscape(store) + "/files"
	req, where, hint, err := c.request("POST", path, nil)
	if err != nil {
		return out, err
	}
	req.Body = pr
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, fmt.Errorf("reaching %s: %w; %s", where, err, hint)
	}
	defer resp.Body.Close()
	return out, c.decode(resp, "POST", path, &out)
}

// decode reads an admin answer into out, or its error.
func (c *ctl) decode(resp *http.Response, method, path string, out any) error {
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var e struct{ Error string }
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s%s", e.Error, hostHint(e.Error, c.admin))
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(raw)))
	}
	return json.Unmarshal(raw, out)
}

// kbWait waits until none of the uploaded files (id → name) is in
// progress, then prints the counts and each failure's reason.
func (c *ctl) kbWait(store string, uploaded map[string]string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	p := newKBProgress(c, nil)
	for {
		var d llmapi.KBStoreDetail
		if err := c.read("/llm/kb/stores/"+url.PathEscape(store), &d); err != nil {
			p.stop()
			return err
		}
		var done, failed []llmapi.KBFile
		for _, f := range d.Files {
			if _, ours := uploaded[f.ID]; ours && f.Status != "in_progress" {
				done = append(done, f)
				if f.Status != "completed" {
					failed = append(failed, f)
				}
			}
		}
		if len(done) == len(uploaded) {
			p.stop()
			return c.kbReport(d, uploaded, failed)
		}
		if time.Now().After(deadline) {
			p.stop()
			return fmt.Errorf("%d of %d files are still being read after %s; they go on in the background (llmgw ctl kb list shows them)", len(uploaded)-len(done), len(uploaded), timeout)
		}
		p.waiting(len(done), len(uploaded))
		time.Sleep(500 * time.Millisecond)
	}
}

// kbReport prints how the files ended; an error when some failed.
func (c *ctl) kbReport(d llmapi.KBStoreDetail, uploaded map[string]string, failed []llmapi.KBFile) error {
	if c.json {
		if err := c.print(d); err != nil || len(failed) == 0 {
			return err
		}
		return fmt.Errorf("%d of %d files could not be read", len(failed), len(uploaded))
	}
	fmt.Fprintf(c.out, "%d files added to %s: %d completed, %d failed; it holds %s in %s files\n", len(uploaded), d.ID, len(uploaded)-len(failed), len(failed),
		humanize.IBytes(uint64(d.Bytes)), fmt.Sprint(d.FileCounts.Total))
	for _, f := range failed {
		fmt.Fprintf(c.out, "  %s %s: %s\n", f.Status, uploaded[f.ID], dash(f.Error))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d files could not be read", len(failed), len(uploaded))
	}
	return nil
}

// kbProgress shows how an upload and the reading after it get on: a bar
// redrawn on stderr when it is a terminal, plain lines on stdout
// otherwise (none with --json).
type kbProgress struct {
	c           *ctl
	tty         bool
	mu          sync.Mutex
	total, sent int64
	files, n    int    // files to upload, and uploaded
	cur         string // the file being uploaded
	drawn       time.Time
	lastDone    int
}

func newKBProgress(c *ctl, files []kbLocal) *kbProgress {
	p := &kbProgress{c: c, tty: isTerminal(c.errOut) && !c.json, files: len(files), lastDone: -1}
	for _, f := range files {
		p.total += f.size
	}
	return p
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// start notes the file whose bytes come next.
func (p *kbProgress) start(f kbLocal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur = f.name
}

// Write counts bytes sent.
func (p *kbProgress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent += int64(len(b))
	if p.tty && time.Since(p.drawn) > 100*time.Millisecond {
		p.drawn = time.Now()
		p.bar()
	}
	return len(b), nil
}

// bar draws the upload's bar.
func (p *kbProgress) bar() {
	const width = 30
	frac := 1.0
	if p.total > 0 {
		frac = float64(p.sent) / float64(p.total)
	}
	full := min(width, int(frac*width))
	fmt.Fprintf(p.c.errOut, "\r\033[K[%s%s] %3.0f%%  %d/%d  %s", strings.Repeat("#", full), strings.Repeat("-", width-full), frac*100, p.n, p.files, p.cur)
}

// uploaded notes a file sent.
func (p *kbProgress) uploaded(f kbLocal, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	switch {
	case p.tty:
		p.bar()
	case !p.c.json:
		fmt.Fprintf(p.c.out, "uploaded %s (%s) as %s\n", f.name, humanize.IBytes(uint64(f.size)), id)
	}
}

// waiting shows how many of the files are read.
func (p *kbProgress) waiting(done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if done == p.lastDone {
		return
	}
	p.lastDone = done
	switch {
	case p.tty:
		fmt.Fprintf(p.c.errOut, "\r\033[Kreading: %d/%d files done", done, total)
	case !p.c.json:
		fmt.Fprintf(p.c.out, "reading: %d/%d files done\n", done, total)
	}
}

// stop ends the bar's line.
func (p *kbProgress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.c.errOut, "\r\033[K")
	}
}
