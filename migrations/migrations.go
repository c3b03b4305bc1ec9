// Package migrations embeds the goose SQL migrations of the service and of the
// fake processor, so that every binary carries the schema it needs.
package migrations

import "embed"

// FS holds the goose migration files, applied in order of their numbers.
//
//go:embed *.sql
var FS embed.FS
