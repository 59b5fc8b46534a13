package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStartRestart starts a server, writes, restarts it and reads back;
// a stopped server refuses connections.
func TestStartRestart(t *testing.T) {
	dsn, stop, restart := Start(t)
	db := Database(t, dsn)
	exec := func(sql string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, db)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE TABLE kept (x int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	restart()
	if err := exec("SELECT 1/x FROM kept"); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	stop()
	if err := exec("SELECT 1"); err == nil {
		t.Fatal("a stopped server answered")
	}
	restart()
	if err := exec("SELECT 1"); err != nil {
		t.Fatalf("restarted after a stop: %v", err)
	}
}
