package config

import (
	"fmt"
	"strings"
)

// Summary lists the options of a rule that change which events react and
// how often, each after a space, as check --rules prints them ("" when
// none).
func (o RuleOptions) Summary() string {
	var b strings.Builder
	if o.From != "" {
		fmt.Fprintf(&b, " from: %s", o.From)
	}
	if o.Concurrency > 0 {
		fmt.Fprintf(&b, " concurrency: %d", o.Concurrency)
	}
	if o.Retry.Attempts > 0 {
		fmt.Fprintf(&b, " retry: %d every %s+", o.Retry.Attempts, o.Retry.Backoff)
	}
	if o.Collect.Within > 0 {
		fmt.Fprintf(&b, " collect: within %s, max %d", o.Collect.Within, o.Collect.Max)
	}
	return b.String()
}
