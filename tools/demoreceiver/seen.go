package demoreceiver

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// seenLog is the set of event ids already accepted, kept in an append-only
// file, one id a line, so that it survives a restart. It is not safe for
// concurrent use: the Receiver's mutex guards it.
type seenLog struct {
	f   *os.File
	ids map[string]struct{}
	// size is the length of the file's complete lines, where a failed
	// append is cut back to.
	size int64
}

// openSeenLog opens the file at path, creating it if need be, and loads
// the ids in it. A last line without its newline is an append that a crash
// interrupted before it was synced, so before its event was processed or
// answered: it is cut off, and the sender's retry will record it again.
func openSeenLog(path string) (*seenLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open dedupe file: %w", err)
	}
	s, err := loadSeenLog(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("dedupe file %s: %w", path, err)
	}
	return s, nil
}

func loadSeenLog(f *os.File) (*seenLog, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	complete := data[:bytes.LastIndexByte(data, '\n')+1]
	if len(complete) < len(data) {
		if err := f.Truncate(int64(len(complete))); err != nil {
			return nil, fmt.Errorf("cut the torn last line: %w", err)
		}
	}
	// A file just created is durable only once its directory entry is.
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	if err := syncDir(filepath.Dir(f.Name())); err != nil {
		return nil, err
	}
	s := &seenLog{f: f, ids: make(map[string]struct{}), size: int64(len(complete))}
	for line := range bytes.Lines(complete) {
		if id := string(bytes.TrimSuffix(line, []byte("\n"))); id != "" {
			s.ids[id] = struct{}{}
		}
	}
	return s, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}

// has reports whether id was accepted before.
func (s *seenLog) has(id string) bool {
	_, ok := s.ids[id]
	return ok
}

// add appends id to the file and syncs it, and only then counts it as
// seen: once add returns nil, no restart forgets it. On failure the file is
// cut back to its complete lines, so that the next append starts a line of
// its own.
func (s *seenLog) add(id string) error {
	line := id + "\n"
	_, err := s.f.WriteString(line)
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		_ = s.f.Truncate(s.size)
		return fmt.Errorf("record event id: %w", err)
	}
	s.size += int64(len(line))
	s.ids[id] = struct{}{}
	return nil
}

// len is the number of ids seen.
func (s *seenLog) len() int { return len(s.ids) }

func (s *seenLog) close() error { return s.f.Close() }
