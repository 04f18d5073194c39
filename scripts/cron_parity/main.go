// Command cron_parity prints robfig/cron v3's verdict on budget schedules, read as
// Karpenter reads them (sigs.k8s.io/karpenter v1.14.1/v1.15.0, Budget.IsActive:
// cron.ParseStandard("TZ=UTC " + schedule)), and each accepted schedule's next
// activations after fixed instants. tests/apis/test_cron.py compares karpy.apis.cron
// with the output committed in tests/apis/data/cron_golden.json.
//
// Usage: go run . < ../../tests/apis/data/cron_corpus.json > ../../tests/apis/data/cron_golden.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/robfig/cron/v3"
)

// Instants the next activations are computed from (UTC), shared with the test.
var starts = []string{
	"2026-12-02T04:30:15.5Z",
	"2024-02-28T23:59:59Z",
	"2027-12-31T23:59:00Z",
	"2025-03-09T01:59:30Z",
}

type verdict struct {
	Schedule string   `json:"schedule"`
	OK       bool     `json:"ok"`
	Error    string   `json:"error,omitempty"`
	Next     []string `json:"next,omitempty"`
}

func main() {
	var corpus []string
	if err := json.NewDecoder(os.Stdin).Decode(&corpus); err != nil {
		fmt.Fprintln(os.Stderr, "cron_parity: reading the corpus:", err)
		os.Exit(2)
	}
	out := make([]verdict, 0, len(corpus))
	for _, schedule := range corpus {
		v := verdict{Schedule: schedule}
		parsed, err := cron.ParseStandard(fmt.Sprintf("TZ=UTC %s", schedule))
		if err != nil {
			v.Error = err.Error()
		} else {
			v.OK = true
			for _, s := range starts {
				t, _ := time.Parse(time.RFC3339Nano, s)
				next := parsed.Next(t)
				if next.IsZero() {
					v.Next = append(v.Next, "")
				} else {
					v.Next = append(v.Next, next.UTC().Format(time.RFC3339Nano))
				}
			}
		}
		out = append(out, v)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "cron_parity:", err)
		os.Exit(1)
	}
}
