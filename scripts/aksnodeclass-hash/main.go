// Command aksnodeclass-hash prints Karpenter Azure's AKSNodeClass hash (the
// karpenter.azure.com/aksnodeclass-hash annotation) for each AKSNodeClass of a JSON list read
// from stdin, using the provider's own pkg/apis/v1beta1 (AKSNodeClass.Hash). karpy's tests
// compare its Python port (karpy_azure/_hash.py) against the output, committed as
// tests/providers/azure/data/aksnodeclass_hash_golden.json:
//
//	go run . < ../../tests/providers/azure/data/aksnodeclass_hash_cases.json \
//	  > ../../tests/providers/azure/data/aksnodeclass_hash_golden.json
//
// Input: [{"name": "...", "aksnodeclass": {object}}, ...].
// Output: the same list with "hash" added to each entry, plus the hash version.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	v1beta1 "github.com/Azure/karpenter-provider-azure/pkg/apis/v1beta1"
)

type testCase struct {
	Name         string          `json:"name"`
	AKSNodeClass json.RawMessage `json:"aksnodeclass"`
	Hash         string          `json:"hash,omitempty"`
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
		var nc v1beta1.AKSNodeClass
		if err := json.Unmarshal(cases[i].AKSNodeClass, &nc); err != nil {
			fmt.Fprintf(os.Stderr, "case %s: %v\n", cases[i].Name, err)
			os.Exit(1)
		}
		cases[i].Hash = nc.Hash()
	}
	out := output{
		Generator:   "scripts/aksnodeclass-hash (github.com/Azure/karpenter-provider-azure " + providerVersion + ")",
		HashVersion: v1beta1.AKSNodeClassHashVersion,
		Cases:       cases,
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "writing:", err)
		os.Exit(1)
	}
}
