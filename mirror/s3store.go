package mirror

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config configures an S3-compatible store.
type S3Config struct {
	// Endpoint is host[:port], without a scheme.
	Endpoint string
	Bucket   string
	// Prefix is put before every key ("weights/").
	Prefix    string
	AccessKey string
	SecretKey string
	Region    string
	// TLS selects https.
	TLS bool
	// PartSize is the multipart part size. Default: 16 MiB.
	PartSize int64
	// Uploads is how many parts are sent at once. Default: 4.
	Uploads int
	// KeysFrom says where the keys came from, for the message when the
	// store refuses them ("$AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY").
	KeysFrom string
}

// DefaultPartSize is the multipart part size when none is configured.
const DefaultPartSize = 16 << 20

// S3Store keeps objects in an S3 bucket through minio-go. Large objects go
// up as multipart uploads that resume: the parts already stored whose
// CRC32C (or MD5 ETag) matches the source are kept, only the rest are
// sent. A local file is streamed from disk; other sources go through at
// most three part buffers, whatever the object's size.
type S3Store struct {
	name string
	cfg  S3Config
	core *minio.Core

	bucketOnce sync.Mutex
	bucketOK   bool
}

// NewS3Store makes an S3 store; it does not contact the server.
func NewS3Store(name string, cfg S3Config) (*S3Store, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, fmt.Errorf("store %s: an s3 store needs an endpoint and a bucket", name)
	}
	if strings.Contains(cfg.Endpoint, "://") {
		return nil, fmt.Errorf("store %s: endpoint %q must be host:port without a scheme; use tls on for https", name, cfg.Endpoint)
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.PartSize < 5<<20 {
		return nil, fmt.Errorf("store %s: part size %d is below S3's minimum of 5 MiB", name, cfg.PartSize)
	}
	if cfg.Uploads <= 0 {
		cfg.Uploads = 4
	}
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	core, err := minio.NewCore(cfg.Endpoint, &minio.Options{
		Creds:      credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:     cfg.TLS,
		Region:     cfg.Region,
		MaxRetries: 2,
	})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", name, err)
	}
	return &S3Store{name: name, cfg: cfg, core: core}, nil
}

// Name implements Store.
func (s *S3Store) Name() string { return s.name }

// Ping implements Store: the bucket must exist or be creatable.
func (s *S3Store) Ping(ctx context.Context) error {
	s.bucketOnce.Lock()
	defer s.bucketOnce.Unlock()
	ok, err := s.core.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return s.wrap("", err)
	}
	if !ok && !s.bucketOK {
		if err := s.core.MakeBucket(ctx, s.cfg.Bucket, minio.MakeBucketOptions{Region: s.cfg.Region}); err != nil {
			if code := minio.ToErrorResponse(err).Code; code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
				return s.wrap("", err)
			}
		}
	}
	s.bucketOK = true
	return nil
}

// Put implements Store.
func (s *S3Store) Put(ctx context.Context, key string, src io.ReaderAt, size int64, sum string, t *Transfer) (PutStats, error) {
	if size < s.cfg.PartSize {
		return s.putSmallVerified(ctx, key, src, size, sum, t)
	}
	return s.putMultipart(ctx, key, src, size, sum, t)
}

// putSmallVerified reads an object smaller than one part, checks its sum
// and sends it in one request.
func (s *S3Store) putSmallVerified(ctx context.Context, key string, src io.ReaderAt, size int64, sum string, t *Transfer) (PutStats, error) {
	buf := make([]byte, size)
	if _, err := src.ReadAt(buf, 0); err != nil && !(errors.Is(err, io.EOF) && size == 0) {
		return PutStats{}, fmt.Errorf("store %s: reading source of %s: %w", s.name, key, err)
	}
	h := newSums()
	h.Write(buf)
	got, b3 := h.hex()
	if sum != "" && got != sum {
		return PutStats{}, fmt.Errorf("store %s: %s: got sha256 %s, want %s: %w", s.name, key, got, sum, ErrChecksum)
	}
	mh := md5.Sum(buf)
	_, err := s.core.PutObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, bytes.NewReader(buf), size,
		base64.StdEncoding.EncodeToString(mh[:]), got, minio.PutObjectOptions{UserMetadata: map[string]string{"sha256": got}})
	if err != nil {
		return PutStats{}, s.wrap(key, err)
	}
	t.Add(size)
	return PutStats{PartsSent: 1, BytesSent: size, SHA256: got, BLAKE3: b3}, nil
}

type part struct {
	num    int
	off, n int64
	buf    []byte // the part's bytes; nil: read them from the source file
	crc    string // base64 CRC32C, sent for the server to check
}

// castagnoli is the CRC32C table; the part checksum S3 keeps and lists.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (s *S3Store) putMultipart(ctx context.Context, key string, src io.ReaderAt, size int64, sum string, t *Transfer) (PutStats, error) {
	obj := s.cfg.Prefix + key
	uploadID, have, err := s.findUpload(ctx, obj)
	if err != nil {
		return PutStats{}, err
	}
	if uploadID == "" {
		opts := minio.PutObjectOptions{UserMetadata: map[string]string{"x-amz-checksum-algorithm": "CRC32C"}}
		if sum != "" {
			opts.UserMetadata["sha256"] = sum
		}
		uploadID, err = s.core.NewMultipartUpload(ctx, s.cfg.Bucket, obj, opts)
		if err != nil {
			return PutStats{}, s.wrap(key, err)
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nparts := int((size + s.cfg.PartSize - 1) / s.cfg.PartSize)
	// A local file is read twice, to hash and to send, and never held in
	// memory; any other source (another store) is read once into part
	// buffers, (uploads+1) of them.
	file, fromFile := src.(*os.File)
	var free chan []byte
	if !fromFile {
		free = make(chan []byte, 3)
		for range 3 {
			free <- make([]byte, s.cfg.PartSize)
		}
	}
	send := make(chan *part)
	done := make([]minio.CompletePart, nparts)
	var stats PutStats
	var sent, sentBytes atomic.Int64
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}

	var wg sync.WaitGroup
	for range s.cfg.Uploads {
		wg.Go(func() {
			for p := range send {
				var body io.Reader = io.NewSectionReader(file, p.off, p.n)
				if p.buf != nil {
					body = bytes.NewReader(p.buf)
				}
				// The payload goes unsigned: the server checks each part's
				// CRC32C, and the whole file's sha256 is checked before
				// the upload completes.
				op, err := s.core.PutObjectPart(ctx, s.cfg.Bucket, obj, uploadID, p.num, body, p.n,
					minio.PutObjectPartOptions{DisableContentSha256: true, CustomHeader: http.Header{"X-Amz-Checksum-Crc32c": {p.crc}}})
				if err != nil {
					fail(s.wrap(key, err))
				} else {
					done[p.num-1] = minio.CompletePart{PartNumber: p.num, ETag: op.ETag, ChecksumCRC32C: p.crc}
					sent.Add(1)
					sentBytes.Add(p.n)
					t.Add(p.n)
				}
				if p.buf != nil {
					free <- p.buf[:cap(p.buf)]
				}
			}
		})
	}

	whole := newSums()
	crc := crc32.New(castagnoli)
	var scratch []byte
	if fromFile {
		scratch = make([]byte, 1<<20)
	}
	reused := 0
read:
	for i := range nparts {
		off := int64(i) * s.cfg.PartSize
		n := min(s.cfg.PartSize, size-off)
		p := &part{num: i + 1, off: off, n: n}
		old, resumable := have[i+1]
		resumable = resumable && old.Size == n
		var m5 hash.Hash
		if resumable && old.ChecksumCRC32C == "" {
			m5 = md5.New() // the store lists only ETags
		}
		crc.Reset()
		if fromFile {
			for o := off; o < off+n; {
				c := scratch[:min(int64(len(scratch)), off+n-o)]
				if _, err := src.ReadAt(c, o); err != nil && !errors.Is(err, io.EOF) {
					fail(fmt.Errorf("store %s: reading source of %s at %d: %w", s.name, key, o, err))
					break read
				}
				whole.Write(c)
				crc.Write(c)
				if m5 != nil {
					m5.Write(c)
				}
				o += int64(len(c))
			}
		} else {
			select {
			case p.buf = <-free:
			case <-ctx.Done():
				break read
			}
			p.buf = p.buf[:n]
			if _, err := src.ReadAt(p.buf, off); err != nil && !(errors.Is(err, io.EOF) && len(p.buf) == int(n)) {
				fail(fmt.Errorf("store %s: reading source of %s at %d: %w", s.name, key, off, err))
				break
			}
			whole.Write(p.buf)
			crc.Write(p.buf)
			if m5 != nil {
				m5.Write(p.buf)
			}
		}
		p.crc = base64.StdEncoding.EncodeToString(crc.Sum(nil))
		if resumable && ((old.ChecksumCRC32C != "" && old.ChecksumCRC32C == p.crc) ||
			(m5 != nil && strings.Trim(old.ETag, `"`) == hex.EncodeToString(m5.Sum(nil)))) {
			done[i] = minio.CompletePart{PartNumber: i + 1, ETag: old.ETag, ChecksumCRC32C: old.ChecksumCRC32C}
			reused++
			t.Add(n)
			if p.buf != nil {
				free <- p.buf[:cap(p.buf)]
			}
			continue
		}
		select {
		case send <- p:
		case <-ctx.Done():
			break read
		}
	}
	close(send)
	wg.Wait()
	stats = PutStats{PartsSent: int(sent.Load()), PartsReused: reused, BytesSent: sentBytes.Load()}
	if firstErr != nil {
		// The parts sent stay with the upload for the next attempt.
		return stats, firstErr
	}
	if err := ctx.Err(); err != nil {
		return stats, err
	}
	got, b3 := whole.hex()
	if sum != "" && got != sum {
		_ = s.core.AbortMultipartUpload(context.WithoutCancel(ctx), s.cfg.Bucket, obj, uploadID)
		return stats, fmt.Errorf("store %s: %s: got sha256 %s, want %s: %w", s.name, key, got, sum, ErrChecksum)
	}
	stats.SHA256, stats.BLAKE3 = got, b3
	if _, err := s.core.CompleteMultipartUpload(ctx, s.cfg.Bucket, obj, uploadID, done, minio.PutObjectOptions{}); err != nil {
		return stats, s.wrap(key, err)
	}
	return stats, nil
}

// findUpload finds an unfinished multipart upload of obj and the parts it
// holds, so an interrupted upload goes on where it stopped.
func (s *S3Store) findUpload(ctx context.Context, obj string) (string, map[int]minio.ObjectPart, error) {
	res, err := s.core.ListMultipartUploads(ctx, s.cfg.Bucket, obj, "", "", "", 1000)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NotImplemented" {
			return "", nil, nil
		}
		return "", nil, s.wrap(obj, err)
	}
	var id string
	var latest minio.ObjectMultipartInfo
	for _, u := range res.Uploads {
		if u.Key == obj && (id == "" || u.Initiated.After(latest.Initiated)) {
			id, latest = u.UploadID, u
		}
	}
	if id == "" {
		return "", nil, nil
	}
	have := make(map[int]minio.ObjectPart)
	marker := 0
	for {
		lp, err := s.core.ListObjectParts(ctx, s.cfg.Bucket, obj, id, marker, 1000)
		if err != nil {
			if minio.ToErrorResponse(err).Code == "NoSuchUpload" {
				return "", nil, nil
			}
			return "", nil, s.wrap(obj, err)
		}
		for _, p := range lp.ObjectParts {
			have[p.PartNumber] = p
		}
		if !lp.IsTruncated {
			break
		}
		marker = lp.NextPartNumberMarker
	}
	return id, have, nil
}

// PutSmall implements Store.
func (s *S3Store) PutSmall(ctx context.Context, key string, data []byte) error {
	sh := sha256.Sum256(data)
	mh := md5.Sum(data)
	_, err := s.core.PutObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, bytes.NewReader(data), int64(len(data)),
		base64.StdEncoding.EncodeToString(mh[:]), hex.EncodeToString(sh[:]), minio.PutObjectOptions{ContentType: "application/json"})
	return s.wrap(key, err)
}

// Open implements Store.
func (s *S3Store) Open(ctx context.Context, key string, off int64) (io.ReadCloser, error) {
	var opts minio.GetObjectOptions
	if off > 0 {
		if err := opts.SetRange(off, 0); err != nil {
			return nil, err
		}
	}
	rc, _, _, err := s.core.GetObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, opts)
	if err != nil {
		return nil, s.wrap(key, err)
	}
	return rc, nil
}

// ReaderAt implements Store.
func (s *S3Store) ReaderAt(ctx context.Context, key string) (ReadAtCloser, error) {
	if _, err := s.Stat(ctx, key); err != nil {
		return nil, err
	}
	o, err := s.core.Client.GetObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.wrap(key, err)
	}
	return o, nil
}

// Stat implements Store.
func (s *S3Store) Stat(ctx context.Context, key string) (Object, error) {
	info, err := s.core.StatObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return Object{}, s.wrap(key, err)
	}
	return Object{Key: key, Size: info.Size, Modified: info.LastModified}, nil
}

// List implements Store.
func (s *S3Store) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	for o := range s.core.Client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: s.cfg.Prefix + prefix, Recursive: true}) {
		if o.Err != nil {
			if minio.ToErrorResponse(o.Err).Code == "NoSuchBucket" {
				return nil, nil
			}
			return nil, s.wrap(prefix, o.Err)
		}
		out = append(out, Object{Key: strings.TrimPrefix(o.Key, s.cfg.Prefix), Size: o.Size, Modified: o.LastModified})
	}
	return out, nil
}

// Delete implements Store.
func (s *S3Store) Delete(ctx context.Context, key string) error {
	err := s.core.RemoveObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, minio.RemoveObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return nil
	}
	return s.wrap(key, err)
}

// wrap names the store in an error and sorts it: absent objects wrap
// ErrNotFound, failures to reach the server are an UnreachableError.
func (s *S3Store) wrap(key string, err error) error {
	if err == nil {
		return nil
	}
	switch code := minio.ToErrorResponse(err).Code; code {
	case "NoSuchKey", "NoSuchBucket", "NotFound":
		return fmt.Errorf("store %s: %s: %w", s.name, key, ErrNotFound)
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch":
		from := s.cfg.KeysFrom
		if from == "" {
			from = "the store's configuration"
		}
		return fmt.Errorf("store %s refused the request (%s); check the keys, which come from %s, and the bucket's policy", s.name, code, from)
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &UnreachableError{Store: s.name, Err: err}
	}
	return fmt.Errorf("store %s: %s: %w", s.name, key, err)
}

// Interface guards
var _ Store = (*S3Store)(nil)
