// Package enginelist knows the engines a gateway can run: the built-in
// ones, those its config names and the plugin files in its plugin
// directory, each described whether a model runs it now or not (for GET
// /llm/engines and the forms that add models); how to start each
// (Command); and the plugins a config runs (Set), kept across reloads.
package enginelist

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/plugins/engine"
	"github.com/llmgw/llmgw/plugins/host"
)

// PluginPrefix starts the name of an engine plugin file.
const PluginPrefix = "llmgw-engine-"

// DescribeTimeout bounds asking an engine that is not running.
const DescribeTimeout = 10 * time.Second

// Command is how to start the plugin of engine typ: the executable
// path the config gives, else llmgw itself for a built-in engine, else
// the plugin file in pluginDir; and the SHA-256 sum it must have.
func Command(typ, path, sum, pluginDir string, builtIn bool) ([]string, string, error) {
	if path == "" && builtIn {
		exe, err := os.Executable()
		if err != nil {
			return nil, "", fmt.Errorf("finding the llmgw executable: %w", err)
		}
		return []string{exe, "engine", typ}, sum, nil
	}
	if path == "" {
		path = filepath.Join(pluginDir, PluginPrefix+typ)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, "", fmt.Errorf("engine %q: no plugin at %s; built-in engines are sim, simimage, comfyui, openai, anthropic, llamacpp, vllm and ollama; others are executables named llmgw-engine-%s in the plugin directory (plugin_dir)", typ, path, typ)
	}
	return []string{path}, sum, nil
}

// Installed is every engine type: builtIn, configured, and each plugin
// file in dir, sorted, each once.
func Installed(builtIn, configured []string, dir string) []string {
	types := slices.Concat(builtIn, configured)
	if dir != "" {
		files, _ := filepath.Glob(filepath.Join(dir, PluginPrefix+"*"))
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				types = append(types, strings.TrimPrefix(filepath.Base(f), PluginPrefix))
			}
		}
	}
	slices.Sort(types)
	return slices.Compact(types)
}

// DescribeTTL is how long what an engine that is not running said of
// itself is kept: its plugin file is not run again for every list.
const DescribeTTL = time.Minute

// Cache keeps what engines that are not running said of themselves, by
// command. The zero value is ready to use.
type Cache struct {
	mu sync.Mutex
	m  map[string]described
}

type described struct {
	info engine.Info
	err  error
	at   time.Time
}

// describe runs host.Describe unless the same command answered within
// DescribeTTL.
func (c *Cache) describe(ctx context.Context, argv []string, sum string) (engine.Info, error) {
	key := strings.Join(argv, "\x00") + "\x00" + sum
	c.mu.Lock()
	d, ok := c.m[key]
	c.mu.Unlock()
	if ok && time.Since(d.at) < DescribeTTL {
		return d.info, d.err
	}
	info, err := host.Describe(ctx, argv, sum)
	if ctx.Err() != nil {
		return info, err // cut short: not the engine's answer
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]described{}
	}
	c.m[key] = described{info: info, err: err, at: time.Now()}
	return info, err
}

// Source is how an engine type is learnt about.
type Source struct {
	// Running returns the Info and process id of the type's plugin when
	// the config runs it.
	Running func(typ string) (engine.Info, int, bool)
	// Command returns how to run the type's plugin and its sha256.
	Command func(typ string) (argv []string, sum string, err error)
	// Cache keeps what plugins that are not running said; nil: none.
	Cache *Cache
}

// List describes each of types: a running one by its plugin, the others
// by running their plugin with describe, at once.
func List(ctx context.Context, types []string, src Source) []llmapi.EngineStatus {
	ctx, cancel := context.WithTimeout(ctx, DescribeTimeout)
	defer cancel()
	out := make([]llmapi.EngineStatus, len(types))
	var wg sync.WaitGroup
	for i, typ := range types {
		if info, pid, ok := src.Running(typ); ok {
			out[i] = status(typ, info)
			out[i].PID, out[i].Running = pid, true
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = llmapi.EngineStatus{Type: typ}
			argv, sum, err := src.Command(typ)
			var info engine.Info
			switch {
			case err == nil && src.Cache != nil:
				info, err = src.Cache.describe(ctx, argv, sum)
			case err == nil:
				info, err = host.Describe(ctx, argv, sum)
			}
			if info.Type != "" {
				out[i] = status(typ, info) // its options, even when it cannot run here
			}
			if err != nil {
				out[i].Error = err.Error()
			}
		}()
	}
	wg.Wait()
	return out
}

func status(typ string, i engine.Info) llmapi.EngineStatus {
	return llmapi.EngineStatus{Type: typ, Version: i.Version, Capabilities: i.Capabilities, Formats: i.Formats,
		Options: i.Options, ReservedArgs: i.ReservedArgs, Example: i.Example}
}
