// Package migrations embeds the fake processor's goose migrations: its own
// schema, processor, which it applies itself (fakeprocessor.Migrate).
package migrations

import "embed"

// FS holds the goose migration files, applied in order of their numbers.
//
//go:embed *.sql
var FS embed.FS
