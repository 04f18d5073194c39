// Command nodepool-hash prints Karpenter's NodePool hash (the karpenter.sh/nodepool-hash
// annotation, hash version v3) for each NodePool of a JSON list read from stdin, using
// Karpenter's own pkg/apis/v1. karpy's tests compare its Python port against the
// output, committed as tests/apis/data/nodepool_hash_golden.json:
//
//	go run . < ../../tests/apis/data/nodepool_hash_cases.json
//
// Input: [{"name": "...", "nodepool": {NodePool object}}, ...].
// Output: the same list with "hash" added to each entry, plus the hash version.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

type testCase struct {
	Name     string          `json:"name"`
	NodePool json.RawMessage `json:"nodepool"`
	Hash     string          `json:"hash,omitempty"`
}

type output struct {
	Generator   string     `json:"generator"`
	HashVersion string     `json:"hashVersion"`
	Cases       []testCase `json:"cases"`
}

func main() {
	var cases []testCase
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		fmt.Fprintln(os.Stderr, "reading cases:", err)
		os.Exit(1)
	}
	for i := range cases {
		var np v1.NodePool
		if err := json.Unmarshal(cases[i].NodePool, &np); err != nil {
			fmt.Fprintf(os.Stderr, "case %s: %v\n", cases[i].Name, err)
			os.Exit(1)
		}
		cases[i].Hash = np.Hash()
	}
	out := output{
		Generator:   "scripts/nodepool-hash (sigs.k8s.io/karpenter " + karpenterVersion + ")",
		HashVersion: v1.NodePoolHashVersion,
		Cases:       cases,
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "writing:", err)
		os.Exit(1)
	}
}
