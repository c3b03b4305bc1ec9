package process

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"reflect"

	"go.opentelemetry.io/otel/trace"
)

// Logging is how a program logs, read from the environment with the rest of
// its configuration.
type Logging struct {
	// LogFormat is "json" for machines (the default) or "text" for a person
	// at a terminal (make run).
	LogFormat string `envconfig:"LOG_FORMAT" default:"json" desc:"json or text"`
	// LogLevel is the least severe level written: debug, info (the
	// default), warn or error.
	LogLevel string `envconfig:"LOG_LEVEL" default:"info" desc:"the least severe records written: debug, info, warn or error"`
}

// logLevels are the values of LOG_LEVEL.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// Validate refuses a format or a level this program does not know, naming
// the variable.
func (l Logging) Validate() error {
	if l.LogFormat != "json" && l.LogFormat != "text" {
		return fmt.Errorf("LOG_FORMAT (%q) must be json or text", l.LogFormat)
	}
	if _, ok := logLevels[l.LogLevel]; !ok {
		return fmt.Errorf("LOG_LEVEL (%q) must be debug, info, warn or error", l.LogLevel)
	}
	return nil
}

// Logger is NewLogger as l says, writing to w; an error for a format or a
// level it does not know.
func (l Logging) Logger(w io.Writer) (*slog.Logger, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return NewLogger(w, l.LogFormat, logLevels[l.LogLevel]), nil
}

// NewLogger returns a logger writing records of level and above to w: JSON
// for machines, or text, one readable line a record, for a person at a
// terminal (LOG_FORMAT). A record logged with a context holding a span
// (InfoContext, LogAttrs) carries its trace_id and span_id, so that the
// lines about one request or job, in every program, join up with its trace.
func NewLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(TraceIDs(slog.NewTextHandler(w, opts)))
	}
	return slog.New(TraceIDs(slog.NewJSONHandler(w, opts)))
}

// TraceIDs wraps h so that each record logged with a context holding a
// valid span gets trace_id and span_id attributes. Under a group
// (WithGroup), they go in the group.
func TraceIDs(h slog.Handler) slog.Handler { return traceIDs{Handler: h} }

// traceIDs is the handler TraceIDs returns.
type traceIDs struct{ slog.Handler }

func (h traceIDs) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone() // the record may be shared with other handlers
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceIDs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceIDs{Handler: h.Handler.WithAttrs(attrs)}
}

func (h traceIDs) WithGroup(name string) slog.Handler {
	return traceIDs{Handler: h.Handler.WithGroup(name)}
}

// LogConfig logs every field of the configuration struct cfg, embedded
// structs flattened, except those envconfig ignores (set by tests). A URL field loses its password.
func LogConfig(logger *slog.Logger, cfg any) {
	logger.Info("configuration", configAttrs(reflect.Indirect(reflect.ValueOf(cfg)))...)
}

func configAttrs(v reflect.Value) []any {
	t := v.Type()
	attrs := make([]any, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Tag.Get("log") == "settings" {
			// A processor's settings, read apart: logged as the rest.
			if s := v.Field(i); !s.IsNil() {
				attrs = append(attrs, configAttrs(reflect.Indirect(s.Elem()))...)
			}
			continue
		}
		if f.Tag.Get("ignored") == "true" {
			continue // not configuration: set by tests
		}
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
