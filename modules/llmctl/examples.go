package llmctl

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples are the Example texts of ctl's and mirror's commands, by
// command path under llmgw; withExamples sets them, and a test fails on a
// runnable command without one.
func examples() map[string]string {
	return map[string]string{
		"ctl":                      "llmgw ctl models\nllmgw ctl --admin 127.0.0.1:2019 nodes\nllmgw ctl --url https://gw.example.com/llm --token … keys -o yaml",
		"ctl kb":                   "llmgw ctl kb list\nllmgw ctl kb add handbook ./docs/",
		"ctl mcp":                  "llmgw ctl mcp servers\nllmgw ctl mcp tools github",
		"ctl model":                "llmgw ctl model add -f chat.yaml\nllmgw ctl model scale chat --min 1 --max 4",
		"ctl model adapter":        "llmgw ctl model adapter list chat",
		"mirror":                   "llmgw mirror list\nllmgw mirror add qwen hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF --track",
		"ctl audit":                "llmgw ctl audit --since 1h\nllmgw ctl audit --actor alice --model chat -o json",
		"ctl cache":                "llmgw ctl cache",
		"ctl cache purge":          "llmgw ctl cache purge --model chat\nllmgw ctl cache purge --scope acme/research",
		"ctl engines":              "llmgw ctl engines\nllmgw ctl engines -o yaml",
		"ctl kb add":               "llmgw ctl kb add handbook ./docs/\nllmgw ctl kb add vs_abc123 policy.pdf faq.md --timeout 20m",
		"ctl kb create":            "llmgw ctl kb create --tenant acme/research/alpha handbook\nllmgw ctl kb create --tenant acme --share policies",
		"ctl kb delete":            "llmgw ctl kb delete handbook",
		"ctl kb list":              "llmgw ctl kb list\nllmgw ctl kb list --tenant acme/research -o json",
		"ctl kb reindex":           "llmgw ctl kb reindex handbook",
		"ctl kb search":            "llmgw ctl kb search handbook \"how do I reset my password\" --max 5",
		"ctl keys":                 "llmgw ctl keys\nllmgw ctl keys -o yaml",
		"ctl keys create":          "llmgw ctl keys create --project acme/research/alpha\nllmgw ctl keys create --project acme/research/alpha --id ci-bot",
		"ctl keys limits":          "llmgw ctl keys limits ci-bot --requests-per-minute 60 --tokens-per-day 1000000\nllmgw ctl keys limits ci-bot --clear",
		"ctl keys revoke":          "llmgw ctl keys revoke ci-bot",
		"ctl keys rotate":          "llmgw ctl keys rotate ci-bot",
		"ctl mcp add":              "llmgw ctl mcp add -f tickets.json",
		"ctl mcp authorization":    "llmgw ctl mcp authorization github",
		"ctl mcp authorize":        "llmgw ctl mcp authorize github --tenant key:ci-bot\nllmgw ctl mcp authorize github",
		"ctl mcp deauthorize":      "llmgw ctl mcp deauthorize github --tenant key:ci-bot",
		"ctl mcp disable":          "llmgw ctl mcp disable tickets",
		"ctl mcp enable":           "llmgw ctl mcp enable tickets",
		"ctl mcp remove":           "llmgw ctl mcp remove tickets",
		"ctl mcp servers":          "llmgw ctl mcp servers\nllmgw ctl mcp servers -o json",
		"ctl mcp tools":            "llmgw ctl mcp tools\nllmgw ctl mcp tools github",
		"ctl model adapter add":    "llmgw ctl model adapter add chat sql-expert mirror://sql-lora/v1 --scale 0.8",
		"ctl model adapter list":   "llmgw ctl model adapter list chat",
		"ctl model adapter remove": "llmgw ctl model adapter remove chat sql-expert",
		"ctl model add":            "llmgw ctl model add -f chat.yaml\nllmgw ctl model add -f chat.json --no-check-source\nllmgw ctl model add --preset sdxl-turbo --name sdxl",
		"ctl model presets":        "llmgw ctl model presets\nllmgw ctl model presets -o json",
		"ctl model plan":           "llmgw ctl model plan -f big-model.yaml",
		"ctl model remove":         "llmgw ctl model remove chat\nllmgw ctl model remove chat --purge",
		"ctl model restart":        "llmgw ctl model restart chat",
		"ctl model rollback":       "llmgw ctl model rollback chat",
		"ctl model scale":          "llmgw ctl model scale chat --min 1 --max 4 --idle-timeout 10m\nllmgw ctl model scale chat --max 0",
		"ctl model set":            "llmgw ctl model set chat --class critical --fallbacks chat-small\nllmgw ctl model set chat --context-length 8192 --memory 8GiB",
		"ctl model retry":          "llmgw ctl model retry chat",
		"ctl model licence":        "llmgw ctl model licence llama-70b",
		"ctl model licence accept": "llmgw ctl model licence accept llama-70b --tenant acme\nllmgw ctl model licence accept llama-70b --everyone",
		"ctl model start":          "llmgw ctl model start chat",
		"ctl model stop":           "llmgw ctl model stop chat",
		"ctl model test":           "llmgw ctl model test gpt-4o",
		"ctl model update":         "llmgw ctl model update chat",
		"ctl model updates":        "llmgw ctl model updates chat --check",
		"ctl models":               "llmgw ctl models\nllmgw ctl models -o yaml\nLLMGW_ADMIN_URL=https://gw.example.com/llm LLMGW_ADMIN_TOKEN=… llmgw ctl models",
		"ctl nodes":                "llmgw ctl nodes",
		"ctl peers":                "llmgw ctl peers\nllmgw ctl peers -o json",
		"ctl providers":            "llmgw ctl providers\nllmgw ctl providers chat -o json",
		"ctl nodes drain":          "llmgw ctl nodes drain gpu-2\nllmgw ctl nodes drain gpu-2 --wait",
		"ctl nodes undrain":        "llmgw ctl nodes undrain gpu-2",
		"ctl replicas":             "llmgw ctl replicas",
		"ctl replicas restart":     "llmgw ctl replicas restart chat-3f9a1c2e",
		"ctl requests":             "llmgw ctl requests --since 1h --status 5xx\nllmgw ctl requests --model chat --follow",
		"ctl requests show":        "llmgw ctl requests show 6f1c0e9a-7d7b-4f0e-9a51-3c2b8d1e4a77",
		"ctl tenants":              "llmgw ctl tenants",
		"ctl tenants create":       "llmgw ctl tenants create acme --gpus 4 --requests-per-minute 600\nllmgw ctl tenants create acme/research/alpha --models 'chat-*'",
		"ctl tenants delete":       "llmgw ctl tenants delete acme/research/alpha",
		"ctl tenants get":          "llmgw ctl tenants get acme/research -o yaml",
		"ctl tenants set":          "llmgw ctl tenants set acme/research --tokens-per-minute 100000\nllmgw ctl tenants set acme --gpus 0",
		"ctl usage":                "llmgw ctl usage --org acme --since 24h\nllmgw ctl usage --key ci-bot -o json",
		"ctl weights":              "llmgw ctl weights\nllmgw ctl weights --all",
		"ctl weights prune":        "llmgw ctl weights prune --dry-run\nllmgw ctl weights prune",
		"mirror add":               "llmgw mirror add qwen hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF --track\nllmgw mirror add chat ./models/chat.gguf --version v2",
		"mirror fetch":             "llmgw mirror fetch qwen",
		"mirror list":              "llmgw mirror list\nllmgw mirror list -o yaml",
		"mirror purge":             "llmgw mirror purge old-model",
		"mirror remove":            "llmgw mirror remove qwen v1",
		"mirror rollback":          "llmgw mirror rollback qwen",
		"mirror show":              "llmgw mirror show qwen\nllmgw mirror show qwen v1 -o json",
		"mirror sync":              "llmgw mirror sync\nllmgw mirror sync --deep",
		"mirror update":            "llmgw mirror update qwen",
		"mirror updates":           "llmgw mirror updates",
		"mirror verify":            "llmgw mirror verify qwen v1",
	}
}

// withExamples sets the Example of every command under root (whose path
// under llmgw is root's name) that has one in examples, indented as
// cobra's help shows examples.
func withExamples(root *cobra.Command) {
	ex := examples()
	var set func(cmd *cobra.Command, path string)
	set = func(cmd *cobra.Command, path string) {
		if e, ok := ex[path]; ok && cmd.Example == "" {
			cmd.Example = "  $ " + strings.ReplaceAll(e, "\n", "\n  $ ")
		}
		for _, sub := range cmd.Commands() {
			set(sub, path+" "+sub.Name())
		}
	}
	set(root, root.Name())
}
