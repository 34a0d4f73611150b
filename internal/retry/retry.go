// Package retry calls an operation again while it fails, with a growing
// pause, until it succeeds or its time is up.
package retry

import (
	"context"
	"time"
)

// First and Most bound the pause between tries: it starts at First and
// doubles up to Most.
const (
	First = 50 * time.Millisecond
	Most  = time.Second
)

// Until calls try until it returns nil, or stop (when not nil) reports
// true for its error, or ctx ends; it returns try's last error (nil on
// success). Between tries it pauses First, doubling up to Most: long
// enough for a NATS cluster that lost a node to elect new leaders, short
// enough not to wait much past it.
func Until(ctx context.Context, try func() error, stop func(error) bool) error {
	b := Backoff{Min: First, Max: Most}
	for {
		err := try()
		if err == nil || stop != nil && stop(err) {
			return err
		}
		if !Sleep(ctx, b.Next()) {
			return err
		}
	}
}
