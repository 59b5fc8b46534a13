package kbindex

// compact drops removed chunks and files from a shard: chunks are
// renumbered in order, so postings stay sorted. It runs under the
// shard's write lock, in time linear in the postings.
func (s *shard) compact() {
	if s.live == 0 {
		files := s.files
		s.files, s.fileNum, s.terms, s.compounds = nil, map[string]uint32{}, map[string]*posting{}, map[string]struct{}{}
		s.docFile, s.docSeq, s.docLen, s.vecs, s.scale, s.signs, s.mean = nil, nil, nil, nil, nil, nil, nil
		s.dead, s.sumLen, s.postings, s.dims, s.sw = 0, 0, 0, 0, 0
		for _, f := range files {
			if f.id != "" && f.attrs != nil {
				s.fileNum[f.id] = uint32(len(s.files))
				s.files = append(s.files, fileInfo{id: f.id, attrs: f.attrs})
			}
		}
		return
	}
	fileMap := s.compactFiles()
	newDoc := make([]uint32, len(s.docFile))
	n := uint32(0)
	for d, f := range s.docFile {
		if f == deadFile {
			newDoc[d] = deadFile
			continue
		}
		newDoc[d] = n
		s.docFile[n] = fileMap[f]
		s.docSeq[n] = s.docSeq[d]
		s.docLen[n] = s.docLen[d]
		if s.dims > 0 {
			copy(s.vecs[int(n)*s.dims:int(n+1)*s.dims], s.vecs[d*s.dims:(d+1)*s.dims])
			s.scale[n] = s.scale[d]
			copy(s.signs[int(n)*s.sw:int(n+1)*s.sw], s.signs[d*s.sw:(d+1)*s.sw])
		}
		n++
	}
	s.docFile = shrink(s.docFile[:n])
	s.docSeq = shrink(s.docSeq[:n])
	s.docLen = shrink(s.docLen[:n])
	if s.dims > 0 {
		s.vecs = shrink(s.vecs[:int(n)*s.dims])
		s.scale = shrink(s.scale[:n])
		s.signs = shrink(s.signs[:int(n)*s.sw])
	}
	s.dead = 0
	s.compactPostings(newDoc)
}

// compactFiles drops removed files and returns the new file numbers.
func (s *shard) compactFiles() []uint32 {
	fileMap := make([]uint32, len(s.files))
	var files []fileInfo
	for f, fi := range s.files {
		if fi.id == "" {
			fileMap[f] = deadFile
			continue
		}
		fileMap[f] = uint32(len(files))
		s.fileNum[fi.id] = uint32(len(files))
		files = append(files, fi)
	}
	s.files = files
	return fileMap
}

func (s *shard) compactPostings(newDoc []uint32) {
	s.postings = 0
	for t, p := range s.terms {
		var q posting
		for it := p.iter(); it.next(); {
			if nd := newDoc[it.doc]; nd != deadFile {
				q.add(nd, uint16(it.tf))
			}
		}
		if q.n == 0 {
			delete(s.terms, t)
			delete(s.compounds, t)
			continue
		}
		q.buf = shrink(q.buf)
		*p = q
		s.postings += int64(q.n)
	}
}

// shrink reallocates a slice that uses less than half its capacity.
func shrink[T any](x []T) []T {
	if cap(x) > 64 && len(x) < cap(x)/2 {
		return append([]T(nil), x...)
	}
	return x
}
