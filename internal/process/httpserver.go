package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// MaxHeaderBytes bounds a request's header section.
const MaxHeaderBytes = 32 << 10

// HTTPServer is an HTTP server with read, write and idle timeouts, listening
// from the moment it is made, so that its address is known before it serves.
type HTTPServer struct {
	ln     net.Listener
	srv    *http.Server
	logger *slog.Logger
	// shutdownTimeout bounds how long in-flight requests may finish.
	shutdownTimeout time.Duration
}

// Listen makes an HTTPServer on addr, such as ":8080" or "127.0.0.1:0".
// writeTimeout bounds a whole response, so it must exceed the longest time a
// handler may wait on purpose.
func Listen(addr string, handler http.Handler, logger *slog.Logger, writeTimeout, shutdownTimeout time.Duration) (*HTTPServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return &HTTPServer{ln: ln, logger: logger, shutdownTimeout: shutdownTimeout, srv: &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       60 * time.Second,
		// Headers are small; a megabyte of them (net/http's default) is
		// someone's memory to spend. Past it: 431.
		MaxHeaderBytes: MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}}, nil
}

// Addr is where the server listens.
func (s *HTTPServer) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx ends, then shuts down gracefully.
func (s *HTTPServer) Run(ctx context.Context) error {
	s.logger.Info("listening", "addr", s.Addr())
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops listening, for a server that never ran.
func (s *HTTPServer) Close() { _ = s.ln.Close() }
