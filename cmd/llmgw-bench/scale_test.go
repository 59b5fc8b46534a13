package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestScaleSlotsPerNode(t *testing.T) {
	cfg := scaleConfig{nodeMemory: "64GiB", nodeCores: 16, modelMemory: "5GiB", modelCores: 1}
	if n, err := slotsPerNode(cfg); err != nil || n != 12 {
		t.Errorf("64GiB/16 cores for 5GiB/1 core replicas: %d, %v; want 12", n, err)
	}
	cfg.modelCores = 4
	if n, _ := slotsPerNode(cfg); n != 4 {
		t.Errorf("16 cores for 4-core replicas: %d; want 4", n)
	}
}

func TestScaleCatalogParses(t *testing.T) {
	cfg := scaleConfig{replica: "127.0.0.1:9", min: 5, modelMemory: "5GiB", modelCores: 1}
	cat := scaleCatalog(cfg, 3)
	if strings.Count(cat, "engine openai") != 3 || !strings.Contains(cat, "model m003 {") {
		t.Fatalf("catalog of 3 models:\n%s", cat)
	}
	if _, err := caddyfile.Parse("Caddyfile", []byte("{\n\tllm {\n"+cat+"\t}\n}\n")); err != nil {
		t.Fatalf("the catalog does not parse: %v", err)
	}
}

func TestPlanRunning(t *testing.T) {
	status := func(n1, n2 string) scaleNodes {
		var st scaleNodes
		body := `{"plan":{"a":["n1","n2"]},"nodes":[{"name":"n1","replicas":[` + n1 + `]},{"name":"n2","replicas":[` + n2 + `]}]}`
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	ready := `{"id":"r","model":"a","state":"ready"}`
	for _, tc := range []struct {
		n1, n2 string
		want   bool
	}{
		{"", "", false},
		{ready, ready, true},
		{ready, `{"id":"r","model":"a","state":"starting"}`, false},
		{ready + "," + ready, "", false},
		{ready, ready + `,{"id":"s","model":"b","state":"ready"}`, false},
	} {
		if got := planRunning(status(tc.n1, tc.n2)); got != tc.want {
			t.Errorf("plan a on n1, n2; n1 runs [%s], n2 [%s]: running %t, want %t", tc.n1, tc.n2, got, tc.want)
		}
	}
}
