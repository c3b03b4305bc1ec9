package process

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"reflect"
)

// NewLogger returns a logger writing records of level and above to w: JSON
// for machines, or text, one readable line a record, for a person at a
// terminal (LOG_FORMAT).
func NewLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// LogConfig logs every field of the configuration struct cfg, embedded
// structs flattened. A URL field loses its password.
func LogConfig(logger *slog.Logger, cfg any) {
	logger.Info("configuration", configAttrs(reflect.Indirect(reflect.ValueOf(cfg)))...)
}

func configAttrs(v reflect.Value) []any {
	t := v.Type()
	attrs := make([]any, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			attrs = append(attrs, configAttrs(v.Field(i))...)
			continue
		}
		val := fmt.Sprint(v.Field(i).Interface())
		if u, err := url.Parse(val); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "********")
				val = u.String()
			}
		}
		attrs = append(attrs, slog.String(f.Name, val))
	}
	return attrs
}

// Quiet is logger keeping warnings and errors only, for River, which
// reports every few seconds at info level.
func Quiet(logger *slog.Logger) *slog.Logger {
	return slog.New(minLevel{Handler: logger.Handler().WithAttrs([]slog.Attr{slog.String("component", "river")}), level: slog.LevelWarn})
}

// minLevel drops records below level.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), level: h.level}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), level: h.level}
}
