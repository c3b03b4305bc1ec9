// Package secret is a setting that must never be printed, such as a
// password or an API key.
package secret

import "log/slog"

// String is a secret setting: every way it is formatted or logged (fmt's %v
// and %#v, slog) shows ******** when it is set and nothing when it is not,
// so that a process can log its whole configuration. string(s) is the value
// itself. envconfig reads it as it reads any string.
type String string

// String masks the secret.
func (s String) String() string {
	if s == "" {
		return ""
	}
	return "********"
}

// GoString masks the secret for %#v, which does not call String.
func (s String) GoString() string { return s.String() }

// LogValue masks the secret for slog, whose JSON handler would otherwise
// print the string itself.
func (s String) LogValue() slog.Value { return slog.StringValue(s.String()) }
