package llmguard

import (
	"bytes"
	"io"
	"os"
)

// spoolInMemory is how much of a body a spool keeps in memory; the rest
// goes to a temporary file.
const spoolInMemory = 8 << 20

// spool keeps a request body that must be read before it is handed on
// (a job's multipart body, with its input files): in memory while it is
// small, else in a temporary file, removed by close.
type spool struct {
	mem  bytes.Buffer
	file *os.File
	n    int64 // bytes written
}

// Write appends p.
func (s *spool) Write(p []byte) (int, error) {
	s.n += int64(len(p))
	if s.file == nil && s.mem.Len()+len(p) <= spoolInMemory {
		return s.mem.Write(p)
	}
	if s.file == nil {
		f, err := os.CreateTemp("", "llmgw-guard-*")
		if err != nil {
			return 0, err
		}
		s.file = f
		if _, err := f.Write(s.mem.Bytes()); err != nil {
			return 0, err
		}
		s.mem = bytes.Buffer{}
	}
	return s.file.Write(p)
}

// reader reads what was written, from the start.
func (s *spool) reader() (io.Reader, error) {
	if s.file == nil {
		return bytes.NewReader(s.mem.Bytes()), nil
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.NopCloser(s.file), nil
}

// close removes the temporary file, if any.
func (s *spool) close() {
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
	}
}
