package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/llmgw/llmgw/plugins/engine"
)

// Describe runs an engine plugin that is not running with the argument
// describe and reads its Info (see engine.Serve), checking the file's
// sha256 first when sum is set. ctx bounds the run. An engine that cannot
// run here (its server's binary is missing) returns its Info and why.
func Describe(ctx context.Context, argv []string, sum string) (engine.Info, error) {
	if len(argv) == 0 {
		return engine.Info{}, fmt.Errorf("describing an engine: no command")
	}
	sc, err := secureConfig(sum)
	if err != nil {
		return engine.Info{}, err
	}
	if sc != nil {
		if ok, err := sc.Check(argv[0]); err != nil || !ok {
			return engine.Info{}, fmt.Errorf("engine plugin %s does not match its sha256: %v", argv[0], err)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:len(argv):len(argv)], "describe")...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var d engine.Described
	if err := json.Unmarshal(stdout.Bytes(), &d); err != nil || d.Type == "" {
		if runErr != nil {
			return engine.Info{}, fmt.Errorf("%s describe: %w: %s", argv[0], runErr, bound(strings.TrimSpace(stderr.String())))
		}
		return engine.Info{}, fmt.Errorf("%s describe did not answer with JSON: %v", argv[0], err)
	}
	if d.Error != "" {
		// It names itself and its options, and why it cannot run here.
		return d.Info, errors.New(d.Error)
	}
	return d.Info, runErr
}

// bound keeps at most 256 bytes of a plugin's message.
func bound(s string) string {
	if len(s) > 256 {
		return s[:256] + "…"
	}
	return s
}
