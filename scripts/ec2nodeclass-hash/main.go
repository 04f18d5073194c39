// Command ec2nodeclass-hash prints Karpenter AWS's EC2NodeClass hash (the
// karpenter.k8s.aws/ec2nodeclass-hash annotation) for each EC2NodeClass of a JSON list read
// from stdin, using the provider's own pkg/apis/v1 (EC2NodeClass.Hash). karpy's tests
// compare its Python port (karpy_aws/_hash.py) against the output, committed as
// tests/providers/aws/data/ec2nodeclass_hash_golden.json:
//
//	go run . < ../../tests/providers/aws/data/ec2nodeclass_hash_cases.json \
//	  > ../../tests/providers/aws/data/ec2nodeclass_hash_golden.json
//
// Input: [{"name": "...", "caBundle": "..." (optional), "ec2nodeclass": {object}}, ...].
// Output: the same list with "hash" added to each entry, plus the hash version.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	v1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
)

type testCase struct {
	Name         string          `json:"name"`
	CABundle     *string         `json:"caBundle,omitempty"`
	EC2NodeClass json.RawMessage `json:"ec2nodeclass"`
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
		var nc v1.EC2NodeClass
		if err := json.Unmarshal(cases[i].EC2NodeClass, &nc); err != nil {
			fmt.Fprintf(os.Stderr, "case %s: %v\n", cases[i].Name, err)
			os.Exit(1)
		}
		cases[i].Hash = nc.Hash(cases[i].CABundle)
	}
	out := output{
		Generator:   "scripts/ec2nodeclass-hash (github.com/aws/karpenter-provider-aws " + providerVersion + ")",
		HashVersion: v1.EC2NodeClassHashVersion,
		Cases:       cases,
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "writing:", err)
		os.Exit(1)
	}
}
