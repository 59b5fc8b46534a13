package reqlog

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkBoltAppend is the log's writer per record: encoding and
// writing batches of 1,024 to a bbolt file, with the retention applied.
func BenchmarkBoltAppend(b *testing.B) {
	s := openTest(b)
	es := entries(1024, time.Now())
	keep := Retention{MaxAge: time.Hour, MaxRecords: 100_000, BodyMaxAge: time.Hour}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for i := range es {
			es[i].Rec.ID = fmt.Sprintf("req_%012d", n)
			es[i].Rec.End = time.Now()
			n++
		}
		if err := s.Append(context.Background(), es, keep); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
}
