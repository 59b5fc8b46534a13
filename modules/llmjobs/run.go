package llmjobs

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llmjobs/comfy"
)

// maxAttempts bounds the tries of an idempotent job.
const maxAttempts = 3

// outputClient fetches outputs and talks to replicas; its timeout bounds
// one call, not a job (a job's events come over a WebSocket).
var outputClient = &http.Client{Timeout: 5 * time.Minute}

// run runs job j on replica rep and records how it ended; release gives
// the replica back.
func (s *service) run(j *job, rep *fleet.Replica, release func()) {
	defer release()
	c := &comfy.Client{Base: rep.BaseURL, HTTP: fleet.ClientFor(outputClient, rep), ID: "llmgw-" + j.ID,
		Previews: func(p comfy.Preview) { s.preview(j, p) }}
	runWorkflow := c.Run
	if rep.Transport != nil {
		runWorkflow = c.RunPolled // another node's replica: the hop carries no WebSocket (nor previews)
	}
	wf, err := s.uploadInputs(j, func(name string, data []byte) (string, error) { return c.Upload(j.ctx, name, data) })
	var outs []comfy.Output
	if err == nil {
		outs, err = runWorkflow(j.ctx, wf, func(p comfy.Progress) { s.progress(j, p) })
	}
	var files []outputFile
	if err == nil {
		files, err = s.keep(j, c, outs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j.cancel()
	s.endedLocked(j)
	var refused *comfy.RefusedError
	var failed *comfy.NodeError
	switch {
	case j.stopped:
		s.finishLocked(j, stateCancelled, nil)
	case s.ctx.Err() != nil || caddy.Exiting():
		// The process stops (its replicas with it): the record stays
		// running, and the job is queued again when the jobs open next.
	case err == nil:
		j.Outputs = files
		s.finishLocked(j, stateSucceeded, nil)
	case errors.As(err, &refused):
		s.finishLocked(j, stateFailed, &jobError{Code: "invalid_workflow", Message: "the model's server refused the workflow: " + refused.Error()})
	case errors.As(err, &failed):
		s.finishLocked(j, stateFailed, &jobError{Code: "node_failed", Message: failed.Error()})
	case errors.Is(err, comfy.ErrInterrupted):
		s.finishLocked(j, stateFailed, &jobError{Code: "interrupted", Message: "the replica interrupted the workflow (an operator, or the replica stopping)"})
	default:
		s.replicaFailedLocked(j, rep, err)
	}
}

// replicaFailedLocked ends, or queues again when it is idempotent, a job
// whose replica failed; the replica is not given a job again until its
// fleet has checked it.
func (s *service) replicaFailedLocked(j *job, rep *fleet.Replica, err error) {
	s.failed[j.Model] = rep
	go s.app.Load().ReportFailure(rep)
	switch {
	case j.Idempotent && j.Attempts < maxAttempts:
		// Another replica runs it again; it keeps its place among its
		// project's jobs.
		s.logger.Warn("job's replica failed; running it again", zap.String("job", j.ID), zap.String("replica", rep.ID),
			zap.Int("attempt", j.Attempts), zap.Error(err))
		j.State, j.Progress, j.Node, j.Replica = stateQueued, 0, nil, ""
		j.Error = &jobError{Code: "replica_failed", Message: fmt.Sprintf("try %d: replica %s running the job failed: %v; it runs again", j.Attempts, rep.ID, err)}
		s.queues[j.Model] = append([]*job{j}, s.queues[j.Model]...)
		s.save(j)
		s.changedLocked(j)
		s.kickLocked(j.Model)
	default:
		msg := fmt.Sprintf("replica %s running the job failed: %v", rep.ID, err)
		if !j.Idempotent {
			msg += "; the job is not run again: mark it idempotent to have another replica run it"
		}
		s.finishLocked(j, stateFailed, &jobError{Code: "replica_failed", Message: msg})
		s.logger.Warn("job failed on its replica", zap.String("job", j.ID), zap.String("replica", rep.ID), zap.Error(err))
	}
}

// progress records where the running job is.
func (s *service) progress(j *job, p comfy.Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j.Progress = p.Fraction()
	j.Node = &nodeRef{ID: p.Node, ClassType: classOf(j, p.Node), Step: p.Step, Steps: p.Steps}
	s.changedLocked(j)
}

// preview keeps the running job's latest preview picture, for those
// who stream it.
func (s *service) preview(j *job, p comfy.Preview) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j.preview = &p
	j.previews++
	s.changedLocked(j)
}

// latestPreview is job id's latest preview and how many it has had.
func (s *service) latestPreview(id string) (*comfy.Preview, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobs[id]; j != nil {
		return j.preview, j.previews
	}
	return nil, 0
}

// keep fetches the job's outputs from the replica into the job's folder.
func (s *service) keep(j *job, c *comfy.Client, outs []comfy.Output) ([]outputFile, error) {
	dir := filepath.Join(s.dir, j.ID, "outputs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	files := make([]outputFile, 0, len(outs))
	for i, o := range outs {
		body, ct, err := c.Fetch(j.ctx, o)
		if err != nil {
			return nil, err
		}
		f, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
		if err == nil {
			var n int64
			n, err = io.Copy(f, body)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			files = append(files, outputFile{Index: i, Node: o.Node, Kind: o.Kind, Filename: o.Filename, ContentType: contentType(ct, o.Filename),
				Bytes: n, URL: "/v1/jobs/" + j.ID + "/outputs/" + strconv.Itoa(i)})
		}
		body.Close()
		if err != nil {
			return nil, fmt.Errorf("keeping output %s: %w", o.Filename, err)
		}
	}
	s.storeOutputs(j.ctx, j.ID, dir, files) // s3outputs.go
	return files, nil
}

// contentType is the server's type for a file, else its extension's.
func contentType(given, name string) string {
	if given != "" && given != "application/octet-stream" {
		return given
	}
	switch ext := filepath.Ext(name); ext {
	case ".glb":
		return "model/gltf-binary"
	case "":
	default:
		if t := mime.TypeByExtension(ext); t != "" {
			return t
		}
	}
	return "application/octet-stream"
}
