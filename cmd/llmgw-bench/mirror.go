package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/llmgw/llmgw/mirror/s3test"
)

// mirrorCompare moves one large file to and from a versitygw S3 server,
// with raw minio-go (FPutObject, FGetObject, in this process) and with
// "llmgw mirror add" and "llmgw mirror fetch" (which also checksum every
// byte), interleaved, and reports throughput ratios and the llmgw
// processes' peak RSS.
func mirrorCompare(args []string) error {
	fs := flag.NewFlagSet("mirror", flag.ExitOnError)
	bin := fs.String("llmgw", "./llmgw", "the llmgw binary")
	sizeFlag := fs.String("size", "2GiB", "the file's size")
	rounds := fs.Int("rounds", 3, "interleaved rounds; medians are reported")
	outDir := fs.String("out", defaultOut(), "where fetched copies go (memory by default, so that the disk's write-back speed, the same for both, does not hide the difference)")
	_ = fs.Parse(args)
	size, err := humanize.ParseBytes(*sizeFlag)
	if err != nil {
		return fmt.Errorf("-size: %w", err)
	}
	vgw := s3test.Bin()
	if vgw == "" {
		return errors.New(s3test.Missing)
	}
	dir, err := os.MkdirTemp("", "llmgw-bench-mirror-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "weights.gguf")
	if err := writeNoise(src, int64(size)); err != nil {
		return err
	}

	port, err := freeTCPPort()
	if err != nil {
		return err
	}
	endpoint := fmt.Sprintf("127.0.0.1:%d", port)
	data := filepath.Join(dir, "s3")
	_ = os.MkdirAll(data+".versions", 0o755)
	_ = os.MkdirAll(data, 0o755)
	srv := exec.Command(vgw, s3test.Args(endpoint, data)...)
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	if err := waitListen(endpoint); err != nil {
		return err
	}
	ctx := context.Background()
	raw, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3test.AccessKey, s3test.SecretKey, ""), Region: "us-east-1"})
	if err != nil {
		return err
	}
	if err := raw.MakeBucket(ctx, "raw", minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		return err
	}

	outs, err := os.MkdirTemp(*outDir, "llmgw-bench-mirror-out-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(outs)
	cfg := filepath.Join(dir, "Caddyfile")
	caddyfile := fmt.Sprintf(`{
	llm {
		mirror {
			store s3 s3 {
				endpoint %s
				bucket mirror
				region us-east-1
				access_key_env BENCH_S3_ACCESS
				secret_key_env BENCH_S3_SECRET
			}
			cache %s
		}
	}
}
`, endpoint, filepath.Join(outs, "cache"))
	if err := os.WriteFile(cfg, []byte(caddyfile), 0o644); err != nil {
		return err
	}
	env := append(os.Environ(), "BENCH_S3_ACCESS="+s3test.AccessKey, "BENCH_S3_SECRET="+s3test.SecretKey,
		"HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"))
	llmgw := func(args ...string) (time.Duration, int64, error) {
		cmd := exec.Command(*bin, append([]string{"mirror", "--config", cfg}, args...)...)
		cmd.Env = env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		el := time.Since(start)
		if err != nil {
			return 0, 0, fmt.Errorf("llmgw %v: %v\n%s", args, err, out)
		}
		ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		var rss int64
		if ru != nil {
			rss = ru.Maxrss * 1024
		}
		return el, rss, nil
	}

	var putRaw, putOurs, getRaw, getRawSync, getOurs []float64
	var rssAdd, rssFetch int64
	mb := float64(size) / (1 << 20)
	for i := range *rounds {
		v := fmt.Sprintf("r%d", i)
		// Each timed step starts with no dirty pages of the one before.
		syscall.Sync()
		start := time.Now()
		if _, err := raw.FPutObject(ctx, "raw", "obj-"+v, src, minio.PutObjectOptions{}); err != nil {
			return fmt.Errorf("FPutObject: %w", err)
		}
		putRaw = append(putRaw, mb/time.Since(start).Seconds())
		syscall.Sync()
		el, rss, err := llmgw("add", "bench", src, "--version", v)
		if err != nil {
			return err
		}
		putOurs = append(putOurs, mb/el.Seconds())
		rssAdd = max(rssAdd, rss)

		out := filepath.Join(outs, "raw-"+v)
		syscall.Sync()
		start = time.Now()
		if err := raw.FGetObject(ctx, "raw", "obj-"+v, out, minio.GetObjectOptions{}); err != nil {
			return fmt.Errorf("FGetObject: %w", err)
		}
		getRaw = append(getRaw, mb/time.Since(start).Seconds())
		// llmgw makes its copy durable before renaming it into place; the
		// same for the raw copy, timed from the same start.
		if f, err := os.Open(out); err == nil {
			_ = f.Sync()
			f.Close()
		}
		getRawSync = append(getRawSync, mb/time.Since(start).Seconds())
		os.Remove(out)
		syscall.Sync()
		el, rss, err = llmgw("fetch", "bench", v)
		if err != nil {
			return err
		}
		getOurs = append(getOurs, mb/el.Seconds())
		rssFetch = max(rssFetch, rss)
		// Keep the disk from filling: the next round stores its own copies.
		_ = raw.RemoveObject(ctx, "raw", "obj-"+v, minio.RemoveObjectOptions{})
		_ = os.RemoveAll(filepath.Join(outs, "cache", "bench", v))
		_ = os.RemoveAll(filepath.Join(data, "mirror", "models", "bench", v))
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s file, %d rounds, medians (MiB/s); fetched copies in %s\n", humanize.IBytes(size), *rounds, *outDir)
	fmt.Fprintln(tw, "direction\tminio-go\tllmgw mirror\tratio\tllmgw peak RSS")
	fmt.Fprintf(tw, "upload\t%.0f\t%.0f\t%.2f\t%s\n", medianOf(putRaw), medianOf(putOurs), medianOf(putOurs)/medianOf(putRaw), humanize.IBytes(uint64(rssAdd)))
	fmt.Fprintf(tw, "fetch to node cache\t%.0f\t%.0f\t%.2f\t%s\n", medianOf(getRaw), medianOf(getOurs), medianOf(getOurs)/medianOf(getRaw), humanize.IBytes(uint64(rssFetch)))
	fmt.Fprintf(tw, "fetch, both copies fsynced\t%.0f\t%.0f\t%.2f\t\n", medianOf(getRawSync), medianOf(getOurs), medianOf(getOurs)/medianOf(getRawSync))
	return tw.Flush()
}

// writeNoise writes size pseudo-random bytes (weights do not compress).
func writeNoise(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, 4<<20)
	for left := size; left > 0; {
		n := min(int64(len(buf)), left)
		_, _ = r.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
		left -= n
	}
	return f.Sync()
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitListen(addr string) error {
	for range 200 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s", addr)
}

func medianOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func defaultOut() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}
