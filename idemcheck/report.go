package idemcheck

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
)

// maxEvidence bounds the exchanges printed for one failure; the JSON report
// has them all.
const maxEvidence = 12

// WriteTable prints the report for a person: a table of the checks with
// what each found, then, for each failure, its rule and the exchanges that
// broke it, then the totals.
func (r *Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("idemcheck %s (%s dialect)\n\n", r.URL, r.Dialect)
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tRULE\tDETAIL")
	for _, res := range r.Results {
		status := string(res.Status)
		if res.Status == Fail {
			status = "FAIL" // to stand out in a column of passes
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Name, status, res.Cites, oneLine(res.Detail))
	}
	_ = tw.Flush()
	for _, res := range r.Results {
		if res.Status != Fail {
			continue
		}
		ew.printf("\n--- FAIL %s: %s\n    rule: %s\n", res.Name, res.Detail, res.Rule)
		for i, ex := range res.Evidence {
			if i == maxEvidence {
				ew.printf("\n    … %d more exchanges (see -json)\n", len(res.Evidence)-maxEvidence)
				break
			}
			ex.write(ew)
		}
	}
	ew.printf("\n%d passed, %d failed, %d skipped\n", r.Passed, r.Failed, r.Skipped)
	return ew.err
}

// WriteJSON writes the report as JSON, for CI.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadReport reads a report WriteJSON wrote to the file at path.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read report %s: %w", path, err)
	}
	return &r, nil
}

// write prints one exchange as a request and its answer.
func (ex *Exchange) write(ew *errWriter) {
	ew.printf("\n    > %s   (caller %d, sent at %.0f ms)\n", ex.Request, ex.Caller, ex.At)
	for _, h := range ex.Headers {
		ew.printf("    > %s: %s\n", h.Name, h.Value)
	}
	if ex.Body != "" {
		ew.printf("    > %s\n", shown(ex.Body))
	}
	if ex.Error != "" {
		ew.printf("    < no answer after %.0f ms: %s\n", ex.Elapsed, ex.Error)
		return
	}
	ew.printf("    < %s   (%.0f ms)\n", ex.Status, ex.Elapsed)
	for _, h := range ex.Answer {
		ew.printf("    < %s: %s\n", h.Name, h.Value)
	}
	if ex.Response != "" {
		ew.printf("    < %s\n", shown(ex.Response))
	}
}

// oneLine keeps a text on one line of the table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// shown is a body as sent or received, quoted when it spans lines so that
// evidence shows every byte; a final newline alone is left off.
func shown(s string) string {
	if s = strings.TrimSuffix(s, "\n"); strings.ContainsAny(s, "\r\n\t") {
		return strconv.Quote(s)
	}
	return s
}

// errWriter keeps the first write error, so that printing goes on
// unchecked and the error is returned once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, a ...any) { fmt.Fprintf(e, format, a...) }
