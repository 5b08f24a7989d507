package journal_test

import (
	"testing"

	"github.com/wakegate/wakegate/delivery/keyspace"
)

// TestMain checks that every script call of the tests keeps its KEYS in
// one cluster slot, and that every script of the package ran
// (docs/design.md §14, "Lua scripts").
func TestMain(m *testing.M) { keyspace.TestMain(m) }
