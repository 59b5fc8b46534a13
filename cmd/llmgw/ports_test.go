package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestFreePortNotHandedOutTwice: a port a test holds is not handed to a
// test in another test process (.ci/e2e runs several side by side), also
// while nothing listens on it yet, between freePort and the server
// binding it. The other process starts counting where this one did.
func TestFreePortNotHandedOutTwice(t *testing.T) {
	if from := os.Getenv("LLMGW_TEST_PORTS_FROM"); from != "" {
		first, _ := strconv.Atoi(from)
		nextPort.Store(uint32(first - portLow - 1))
		var got []string
		for range 20 {
			got = append(got, strconv.Itoa(freePort(t)))
		}
		fmt.Printf("ports: %s\n", strings.Join(got, " "))
		return
	}
	var held []int
	for range 20 {
		held = append(held, freePort(t))
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestFreePortNotHandedOutTwice$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("LLMGW_TEST_PORTS_FROM=%d", held[0]),
		"LLMGW_TEST_BIN_DIR="+filepath.Dir(binary))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the other test process: %v\n%s", err, out)
	}
	_, list, ok := strings.Cut(string(out), "ports: ")
	if !ok {
		t.Fatalf("the other test process named no ports:\n%s", out)
	}
	for _, f := range strings.Fields(strings.SplitN(list, "\n", 2)[0]) {
		if p, _ := strconv.Atoi(f); slices.Contains(held, p) {
			t.Errorf("port %d was handed to another test process while this test held it (held: %v)", p, held)
		}
	}
}
