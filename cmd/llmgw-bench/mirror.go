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
	"slices"
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
	fetchRounds := fs.Int("fetch-rounds", 0, "then this many more fetch-only rounds of one stored copy each way (a fetch is short, and its noise needs more rounds than an upload's)")
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
	// Each step's wall time and CPU time, the client's (this process for
	// raw minio-go, the llmgw process otherwise) and the S3 server's.
	type step struct {
		el, client, server time.Duration
		rss                int64
	}
	serverCPU := func() time.Duration { return cpuTimes([]int{srv.Process.Pid})[0] }
	llmgw := func(args ...string) (step, error) {
		cmd := exec.Command(*bin, append([]string{"mirror", "--config", cfg}, args...)...)
		cmd.Env = env
		s0 := serverCPU()
		start := time.Now()
		out, err := cmd.CombinedOutput()
		st := step{el: time.Since(start), server: serverCPU() - s0}
		if err != nil {
			return st, fmt.Errorf("llmgw %v: %v\n%s", args, err, out)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			st.rss = ru.Maxrss * 1024
			st.client = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		return st, nil
	}
	rawStep := func(f func() error) (step, error) {
		s0, c0 := serverCPU(), selfCPU()
		start := time.Now()
		err := f()
		return step{el: time.Since(start), client: selfCPU() - c0, server: serverCPU() - s0}, err
	}

	var putRaw, putUnsigned, putOurs, getRaw, getOurs []step
	// getRawStep fetches version v with FGetObject. llmgw makes its copy
	// durable before renaming it into place; the raw copy is fsynced
	// too, timed the same.
	getRawStep := func(v string) error {
		out := filepath.Join(outs, "raw-"+v)
		defer os.Remove(out)
		st, err := rawStep(func() error {
			if err := raw.FGetObject(ctx, "raw", "obj-"+v, out, minio.GetObjectOptions{}); err != nil {
				return err
			}
			f, err := os.Open(out)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Sync()
		})
		getRaw = append(getRaw, st)
		return err
	}
	getOursStep := func(v string) error {
		st, err := llmgw("fetch", "bench", v)
		getOurs = append(getOurs, st)
		return err
	}
	for i := range *rounds {
		v := fmt.Sprintf("r%d", i)
		steps := []func() error{
			func() error {
				st, err := rawStep(func() error {
					_, err := raw.FPutObject(ctx, "raw", "obj-"+v, src, minio.PutObjectOptions{})
					return err
				})
				putRaw = append(putRaw, st)
				return err
			},
			func() error {
				// What minio-go sends over TLS: no streaming signature,
				// so neither side hashes the payload with SHA-256.
				st, err := rawStep(func() error {
					_, err := raw.FPutObject(ctx, "raw", "unsigned-"+v, src, minio.PutObjectOptions{DisableContentSha256: true})
					return err
				})
				putUnsigned = append(putUnsigned, st)
				return err
			},
			func() error {
				st, err := llmgw("add", "bench", src, "--version", v)
				putOurs = append(putOurs, st)
				return err
			},
			func() error { return getRawStep(v) },
			func() error { return getOursStep(v) },
		}
		// Blocks of steps on one copy, each followed by the removal of
		// what it stored, so that no step pays to reclaim the page cache
		// an earlier one filled. Odd rounds go the other way round.
		blocks := []struct {
			steps   []int
			cleanup func()
		}{
			{[]int{0, 3}, func() { _ = raw.RemoveObject(ctx, "raw", "obj-"+v, minio.RemoveObjectOptions{}) }},
			{[]int{1}, func() { _ = raw.RemoveObject(ctx, "raw", "unsigned-"+v, minio.RemoveObjectOptions{}) }},
			{[]int{2, 4}, func() {
				_ = os.RemoveAll(filepath.Join(outs, "cache", "bench", v))
				_ = os.RemoveAll(filepath.Join(data, "mirror", "models", "bench", v))
			}},
		}
		if i%2 == 1 {
			slices.Reverse(blocks)
		}
		for _, b := range blocks {
			for _, k := range b.steps {
				// Each timed step starts with no dirty pages of the one before.
				syscall.Sync()
				if err := steps[k](); err != nil {
					return err
				}
			}
			b.cleanup()
		}
		if os.Getenv("LLMGW_BENCH_VERBOSE") != "" {
			for _, x := range []struct {
				name string
				ss   []step
			}{{"put raw", putRaw}, {"put unsigned", putUnsigned}, {"put llmgw", putOurs}, {"get raw", getRaw}, {"get llmgw", getOurs}} {
				st := x.ss[len(x.ss)-1]
				fmt.Printf("round %d %-9s %6.2fs  client %5.2fs  server %5.2fs\n", i, x.name, st.el.Seconds(), st.client.Seconds(), st.server.Seconds())
			}
		}
	}
	if *fetchRounds > 0 {
		const v = "fetch"
		if _, err := raw.FPutObject(ctx, "raw", "obj-"+v, src, minio.PutObjectOptions{}); err != nil {
			return fmt.Errorf("FPutObject: %w", err)
		}
		if _, err := llmgw("add", "bench", src, "--version", v); err != nil {
			return err
		}
		fetches := []func() error{
			func() error { return getRawStep(v) },
			func() error {
				defer os.RemoveAll(filepath.Join(outs, "cache", "bench", v))
				return getOursStep(v)
			},
		}
		for i := range *fetchRounds {
			for j := range fetches {
				syscall.Sync()
				if err := fetches[(i+j)%2](); err != nil {
					return err
				}
			}
		}
		_ = raw.RemoveObject(ctx, "raw", "obj-"+v, minio.RemoveObjectOptions{})
	}
	mb := float64(size) / (1 << 20)
	gib := float64(size) / (1 << 30)
	rate := func(ss []step) float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = mb / s.el.Seconds()
		}
		return medianOf(v)
	}
	cpu := func(ss []step, server bool) string {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = s.client.Seconds() / gib
			if server {
				v[i] = s.server.Seconds() / gib
			}
		}
		return fmt.Sprintf("%.2f", medianOf(v))
	}
	ci := func(ours, raws []step) string {
		r := make([]float64, len(ours))
		for i := range r {
			r[i] = raws[i].el.Seconds() / ours[i].el.Seconds()
		}
		m, f := geoMeanCI(r)
		return fmt.Sprintf("%.2f (%.2f–%.2f)", m, m/f, m*f)
	}
	maxRSS := func(ss []step) string {
		var m int64
		for _, s := range ss {
			m = max(m, s.rss)
		}
		return humanize.IBytes(uint64(m))
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s file, %d rounds (and %d more of fetches), medians; fetched copies in %s (fsynced, both)\n", humanize.IBytes(size), *rounds, *fetchRounds, *outDir)
	fmt.Fprintln(tw, "direction\tminio-go MiB/s\tllmgw MiB/s\tratio\tround by round, 95% CI\tclient CPU s/GiB, minio-go / llmgw\tS3 server CPU s/GiB\tllmgw peak RSS")
	if len(putOurs) > 0 {
		fmt.Fprintf(tw, "upload\t%.0f\t%.0f\t%.2f\t%s\t%s / %s\t%s / %s\t%s\n", rate(putRaw), rate(putOurs), rate(putOurs)/rate(putRaw), ci(putOurs, putRaw),
			cpu(putRaw, false), cpu(putOurs, false), cpu(putRaw, true), cpu(putOurs, true), maxRSS(putOurs))
		fmt.Fprintf(tw, "upload, vs unsigned payload\t%.0f\t%.0f\t%.2f\t%s\t%s / %s\t%s / %s\t\n", rate(putUnsigned), rate(putOurs), rate(putOurs)/rate(putUnsigned), ci(putOurs, putUnsigned),
			cpu(putUnsigned, false), cpu(putOurs, false), cpu(putUnsigned, true), cpu(putOurs, true))
	}
	fmt.Fprintf(tw, "fetch to node cache\t%.0f\t%.0f\t%.2f\t%s\t%s / %s\t%s / %s\t%s\n", rate(getRaw), rate(getOurs), rate(getOurs)/rate(getRaw), ci(getOurs, getRaw),
		cpu(getRaw, false), cpu(getOurs, false), cpu(getRaw, true), cpu(getOurs, true), maxRSS(getOurs))
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

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
