// Package serve holds what every binary does the same way: JSON logs, the
// configuration printed with secrets masked, and an HTTP server with timeouts
// that shuts down gracefully when its context ends.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"time"
)

// NewLogger returns a JSON logger writing records of level and above to w.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// LogConfig logs every field of the configuration struct cfg. A field tagged
// `secret:"true"` is masked, and a URL field loses its password.
func LogConfig(logger *slog.Logger, cfg any) {
	v := reflect.Indirect(reflect.ValueOf(cfg))
	t := v.Type()
	attrs := make([]any, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		val := fmt.Sprint(v.Field(i).Interface())
		switch {
		case f.Tag.Get("secret") == "true":
			val = "********"
		default:
			if u, err := url.Parse(val); err == nil && u.User != nil {
				if _, ok := u.User.Password(); ok {
					u.User = url.UserPassword(u.User.Username(), "********")
					val = u.String()
				}
			}
		}
		attrs = append(attrs, slog.String(f.Name, val))
	}
	logger.Info("configuration", attrs...)
}

// Server is an HTTP server with read, write and idle timeouts.
type Server struct {
	// Addr is where to listen, such as ":8080" or "127.0.0.1:0".
	Addr    string
	Handler http.Handler
	Logger  *slog.Logger
	// WriteTimeout bounds a whole response, so it must exceed the longest
	// time a handler may wait on purpose.
	WriteTimeout time.Duration
	// ShutdownTimeout bounds how long in-flight requests may finish.
	ShutdownTimeout time.Duration
}

// Run listens on s.Addr and serves until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.Addr, err)
	}
	srv := &http.Server{
		Handler:           s.Handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      s.WriteTimeout,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn),
	}
	s.Logger.Info("listening", "addr", ln.Addr().String())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
