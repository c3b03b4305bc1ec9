package fakeprocessor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/example/payments/tools/fakeprocessor"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testio"
	"github.com/example/payments/tools/testwait"
)

// listJSON is a list answer as tests read it. HasMore is a pointer so that
// a missing has_more is caught.
type listJSON[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore *bool  `json:"has_more"`
}

// getList GETs a list and fails unless it is a well-formed list object.
func getList[T any](e *env, path string) listJSON[T] {
	e.t.Helper()
	resp := e.get(path)
	if resp.status != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, resp.status, resp.body)
	}
	l := decode[listJSON[T]](e.t, resp)
	if l.Object != "list" || l.Data == nil || l.HasMore == nil {
		e.t.Fatalf("GET %s: not a list: %s", path, resp.body)
	}
	return l
}

func TestListRefundsByKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})
	ch := e.charge("lr-charge", "pm_card_visa")
	first := decode[fakeprocessor.Refund](t, e.post("/v1/refunds", "lr-1", `{"charge":"`+ch+`","amount":100}`))
	e.post("/v1/refunds", "lr-2", `{"charge":"`+ch+`","amount":200}`)

	l := getList[fakeprocessor.Refund](e, "/v1/refunds?idempotency_key=lr-1")
	if len(l.Data) != 1 || *l.HasMore {
		t.Fatalf("list = %+v", l)
	}
	if r := l.Data[0]; r != first || r.IdempotencyKey != "lr-1" || r.Charge != ch || r.Amount != 100 {
		t.Errorf("refund = %+v, want %+v", r, first)
	}
	if l := getList[fakeprocessor.Refund](e, "/v1/refunds?idempotency_key=never-used"); len(l.Data) != 0 || *l.HasMore {
		t.Errorf("unused key: %+v", l)
	}
}

// ledgerRows inserts n rows with SQL (charges or refunds, per table) created
// after since, three to a timestamp so that the id breaks ties (pages of 100
// end inside a triple), with ids in no particular order within a timestamp,
// plus one row at since and one before it that no page may return. It
// returns the ids of the n rows in ledger order: (created_at, id).
func (e *env) ledgerRows(table string, since time.Time, n int) []string {
	e.t.Helper()
	ctx := context.Background()
	const insertCharges = `
INSERT INTO processor.charges (id, idempotency_key, amount, currency, payment_method, status, created_at)
SELECT format('ch_%s_%s_%s', $3::text, left(md5(i::text), 6), i), format('%s-%s', $3::text, i),
    100, 'USD', 'pm_card_visa', 'succeeded', $1::timestamptz + (i / 3) * interval '1 millisecond'
FROM generate_series(0, $2::int - 1) AS i`
	const insertRefunds = `
INSERT INTO processor.refunds (id, charge_id, amount, status, idempotency_key, created_at)
SELECT format('re_%s_%s_%s', $3::text, left(md5(i::text), 6), i), 'ch_ledger_target',
    1, 'succeeded', format('%s-%s', $3::text, i), $1::timestamptz + (i / 3) * interval '1 millisecond'
FROM generate_series(0, $2::int - 1) AS i`
	sql := insertCharges
	if table == "refunds" {
		sql = insertRefunds
		if _, err := e.db.Pool.Exec(ctx, `INSERT INTO processor.charges (id, idempotency_key, amount, currency, payment_method, status, created_at)
			VALUES ('ch_ledger_target', 'target', 100000, 'USD', 'pm_card_visa', 'succeeded', $1)`, since.Add(-time.Hour)); err != nil {
			e.t.Fatal(err)
		}
	}
	for _, rows := range []struct {
		from   time.Time
		n      int
		prefix string
	}{
		{since.Add(time.Millisecond), n, "led"},
		{since, 1, "atsince"},
		{since.Add(-time.Millisecond), 1, "early"},
	} {
		if _, err := e.db.Pool.Exec(ctx, sql, rows.from, rows.n, rows.prefix); err != nil {
			e.t.Fatalf("insert %s %s: %v", rows.prefix, table, err)
		}
	}

	var ids []string
	rows, err := e.db.Pool.Query(ctx, `SELECT id FROM processor.`+table+` WHERE created_at > $1 ORDER BY created_at, id`, since)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if rows.Err() != nil || len(ids) != n {
		e.t.Fatalf("%d rows after since, want %d: %v", len(ids), n, rows.Err())
	}
	return ids
}

func TestLedgerPaging(t *testing.T) {
	t.Parallel()
	since := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)

	for _, table := range []string{"charges", "refunds"} {
		t.Run(table, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, fakeprocessor.Config{})
			want := e.ledgerRows(table, since, 250)

			var (
				got     []string
				sizes   []int
				cursor  string
				seen    = map[string]bool{}
				created = since
			)
			for range 10 {
				q := url.Values{"created_after": {since.Format(time.RFC3339Nano)}, "limit": {"100"}}
				if cursor != "" {
					q.Set("starting_after", cursor)
				}
				l := getList[struct {
					ID        string    `json:"id"`
					CreatedAt time.Time `json:"created_at"`
				}](e, "/v1/"+table+"?"+q.Encode())
				sizes = append(sizes, len(l.Data))
				for _, row := range l.Data {
					if seen[row.ID] {
						t.Errorf("row %s repeated", row.ID)
					}
					if row.CreatedAt.Before(created) || !row.CreatedAt.After(since) {
						t.Errorf("row %s created at %v, out of order or not after since", row.ID, row.CreatedAt)
					}
					seen[row.ID], created = true, row.CreatedAt
					got = append(got, row.ID)
				}
				if !*l.HasMore {
					break
				}
				cursor = l.Data[len(l.Data)-1].ID
			}
			if fmt.Sprint(sizes) != "[100 100 50]" {
				t.Errorf("page sizes = %v, want [100 100 50]", sizes)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("rows paged:\n%v\nwant:\n%v", got, want)
			}

			// The default limit is 100; a page ending exactly at the last
			// row says no more follow.
			if l := getList[fakeprocessor.Charge](e, "/v1/"+table+"?created_after="+url.QueryEscape(since.Format(time.RFC3339Nano))); len(l.Data) != 100 || !*l.HasMore {
				t.Errorf("default page: %d rows, has_more %v", len(l.Data), *l.HasMore)
			}
			q := url.Values{"created_after": {since.Format(time.RFC3339Nano)}, "limit": {"50"}, "starting_after": {want[199]}}
			if l := getList[fakeprocessor.Charge](e, "/v1/"+table+"?"+q.Encode()); len(l.Data) != 50 || *l.HasMore || l.Data[49].ID != want[249] {
				t.Errorf("last page: %d rows, has_more %v", len(l.Data), *l.HasMore)
			}
		})
	}
}

func TestListInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})
	e.charge("inv-charge", "pm_card_visa")
	after := "created_after=" + url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))

	tests := []struct {
		name     string
		query    string
		wantCode string
	}{
		{"ErrNoFilter", "", "parameter_missing"},
		{"ErrTwoFilters", "idempotency_key=k&" + after, "parameter_invalid"},
		{"ErrCreatedAfter", "created_after=yesterday", "parameter_invalid"},
		{"ErrLimitZero", after + "&limit=0", "parameter_invalid"},
		{"ErrLimitTooLarge", after + "&limit=1001", "parameter_invalid"},
		{"ErrLimitNotNumber", after + "&limit=ten", "parameter_invalid"},
		{"ErrLimitEmpty", after + "&limit=", "parameter_invalid"},
		{"ErrUnknownCursor", after + "&starting_after=ch_missing", "parameter_invalid"},
		{"ErrEmptyCursor", after + "&starting_after=", "parameter_invalid"},
		{"ErrLimitWithKey", "idempotency_key=k&limit=10", "parameter_invalid"},
		{"ErrCursorWithKey", "idempotency_key=k&starting_after=ch_1", "parameter_invalid"},
	}
	for _, path := range []string{"/v1/charges", "/v1/refunds"} {
		for _, tt := range tests {
			t.Run(strings.TrimPrefix(path, "/v1/")+tt.name, func(t *testing.T) {
				t.Parallel()
				wantError(t, e.get(path+"?"+tt.query), http.StatusBadRequest, "invalid_request_error", tt.wantCode)
			})
		}
	}
	// A refund listing knows no payment_id; a limit of 1000 is the largest.
	if resp := e.get("/v1/refunds?payment_id=pay_1"); resp.status != http.StatusBadRequest {
		t.Errorf("refunds by payment: %d %s", resp.status, resp.body)
	}
	if l := getList[fakeprocessor.Charge](e, "/v1/charges?"+after+"&limit=1000"); len(l.Data) != 1 || *l.HasMore {
		t.Errorf("limit 1000: %+v", l)
	}
}

func TestAccessLogQuery(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	logs := &testio.Buffer{}
	logger := slog.New(slog.NewJSONHandler(io.MultiWriter(logs, t.Output()), nil))
	proc, err := fakeprocessor.New(db.Pool, logger, fakeprocessor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(proc)
	t.Cleanup(server.Close)

	resp, err := server.Client().Get(server.URL + "/v1/refunds?idempotency_key=traced-key")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	// The line is written once the handler returns, which may be after the
	// client has read the answer.
	testwait.For(t, "the access log line", func() bool {
		dec := json.NewDecoder(strings.NewReader(logs.String()))
		for {
			var line map[string]any
			if dec.Decode(&line) != nil {
				return false
			}
			if line["msg"] == "request" && line["path"] == "/v1/refunds" {
				if line["query"] != "idempotency_key=traced-key" {
					t.Fatalf("access log line = %v", line)
				}
				return true
			}
		}
	})
}
