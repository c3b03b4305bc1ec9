// Package migrations embeds the goose SQL migrations of the service, so that
// every binary carries the schema it needs. River's tables come from River's
// own migrator; the fake processor migrates its own schema.
package migrations

import "embed"

// FS holds the goose migration files, applied in order of their numbers.
//
//go:embed *.sql
var FS embed.FS
