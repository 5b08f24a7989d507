// Package blockread runs a blocking Redis read (XREAD, XREADGROUP with
// BLOCK) so that its caller stops when its context ends.
package blockread

import "context"

// Do runs read and returns when it answers or ctx ends, whichever is
// first: go-redis does not interrupt a blocked command when its context is
// cancelled, so a stop would otherwise wait out the block. An abandoned
// read ends with its block, or when the client is closed.
func Do[T any](ctx context.Context, read func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := read()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
