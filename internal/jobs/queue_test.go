package jobs_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
)

// TestEnqueueIsInsertTx: a job staged in a transaction that rolls back does
// not exist; one staged in a transaction that commits is River's own job,
// with the id Enqueue returned, the operation's args, and River's defaults.
func TestEnqueueIsInsertTx(t *testing.T) {
	t.Parallel()
	q, db := newQueue(t)
	enqueue(t, q, db, false, outbox.Staged{ResourceType: payments.Names.Type, ID: "pay_rolled_back"})
	ids := enqueue(t, q, db, true, outbox.Staged{ResourceType: payments.Names.Type, ID: "pay_1"},
		outbox.Staged{ResourceType: refunds.Names.Type, ID: "re_1"})
	if len(ids) != 2 {
		t.Fatalf("EnqueueOperations = %v", ids)
	}
	charge, refund := ids[0], ids[1]

	ctx := t.Context()
	all, err := q.Client.JobList(ctx, river.NewJobListParams().First(10))
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Jobs) != 2 {
		t.Fatalf("jobs = %d, want the two committed", len(all.Jobs))
	}
	for _, want := range []struct {
		id         int64
		kind, args string
	}{{charge, "drive_operation", `{"resource_type": "payment", "id": "pay_1"}`}, {refund, "drive_operation", `{"resource_type": "refund", "id": "re_1"}`}} {
		job, err := q.Client.JobGet(ctx, want.id)
		if err != nil {
			t.Fatal(err)
		}
		if job.Kind != want.kind || !jsonEqual(t, job.EncodedArgs, want.args) || job.State != rivertype.JobStateAvailable ||
			job.Queue != river.QueueDefault || job.MaxAttempts != (jobs.OperationArgs{}).InsertOpts().MaxAttempts {
			t.Fatalf("job %d = %s %s %s %s %d", want.id, job.Kind, job.EncodedArgs, job.State, job.Queue, job.MaxAttempts)
		}
	}

	// Both are live until they finish.
	live, err := q.Live(ctx, []int64{charge, refund, refund + 1000}, time.Now())
	if err != nil || !live[charge] || !live[refund] || live[refund+1000] {
		t.Fatalf("live = %v, %v", live, err)
	}
	if _, err := q.Client.JobCancel(ctx, charge); err != nil {
		t.Fatal(err)
	}
	if live, err = q.Live(ctx, []int64{charge, refund}, time.Now()); err != nil || live[charge] || !live[refund] {
		t.Fatalf("live after cancelling the charge job = %v, %v", live, err)
	}
	if unfinished, err := q.Unfinished(ctx, []int64{charge, refund}); err != nil || unfinished[charge] || !unfinished[refund] {
		t.Fatalf("unfinished after cancelling the charge job = %v, %v", unfinished, err)
	}
	if live, err = q.Live(ctx, nil, time.Now()); err != nil || len(live) != 0 {
		t.Fatalf("live of none = %v, %v", live, err)
	}
	// More ids than River lists at once (a sweep of a large RECONCILE_BATCH).
	many := make([]int64, 0, 25_001)
	for id := range int64(25_000) {
		many = append(many, charge+refund+1000+id)
	}
	many = append(many, refund)
	if live, err = q.Live(ctx, many, time.Now()); err != nil || len(live) != 1 || !live[refund] {
		t.Fatalf("live of %d ids = %d live, %v", len(many), len(live), err)
	}
}

func jsonEqual(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// riverInternals are River's tables and notification topics: River's own,
// changed between its releases, so production code never names them (tests
// may read them).
var riverInternals = regexp.MustCompile(`\briver_(job|leader|queue|client|migration|insert|notification|control)\w*`)

// TestRiverOnlyThroughItsPublicAPI: no production Go file under internal or
// cmd has a string naming one of River's tables or notification topics, so
// every use of River goes through its Go API.
func TestRiverOnlyThroughItsPublicAPI(t *testing.T) {
	t.Parallel()
	found := 0
	for _, root := range []string{"../../internal", "../../cmd"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			file, err := parser.ParseFile(token.NewFileSet(), path, src, 0)
			if err != nil {
				return err
			}
			found++
			ast.Inspect(file, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				text, err := strconv.Unquote(lit.Value)
				if err != nil {
					text = lit.Value
				}
				if m := riverInternals.FindString(text); m != "" {
					t.Errorf("%s: %q names River's %s", path, m, m)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found < 20 {
		t.Fatalf("checked only %d files: the walk missed the tree", found)
	}
}

// TestBacklog: River's queue as the worker's metrics read it: the jobs
// available and not worked, and how long the oldest has waited.
func TestBacklog(t *testing.T) {
	t.Parallel()
	q, db := newQueue(t)
	if n, oldest, err := q.Backlog(t.Context()); err != nil || n != 0 || oldest != 0 {
		t.Fatalf("empty queue: %d, %s, %v", n, oldest, err)
	}
	for _, id := range []string{"pay_1", "pay_2"} {
		enqueue(t, q, db, true, outbox.Staged{ResourceType: payments.Names.Type, ID: id})
	}
	// The test reads River's table to age the first job, as time passing would.
	db.Exec(t, `UPDATE river_job SET scheduled_at = now() - interval '10 minutes' WHERE args->>'id' = 'pay_1'`)
	n, oldest, err := q.Backlog(t.Context())
	if err != nil || n != 2 || oldest < 9*time.Minute {
		t.Fatalf("two jobs, the first 10 minutes old: %d, %s, %v", n, oldest, err)
	}
}
