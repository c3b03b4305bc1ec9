// Package chaos proves the money invariants of the contract under kills,
// outages and races, at scale. A run starts its own stack against a fresh
// database as real OS processes (two APIs, two workers and the fake processor
// with its chaos settings on), drives thousands of payments and refunds
// through the public Go client from many goroutines, SIGKILLs a random
// process every few seconds and restarts it, cuts the processor off for
// longer than a worker's retry budget, then waits for quiescence and checks
// every invariant against the database and the processor's ledger. The
// failover profile runs it all through PgBouncer and HAProxy on a Patroni
// pair (tools/hapg) whose primary it kills again and again (failover.go).
package chaos

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/signing"
	"github.com/example/payments/internal/timer"
	"github.com/example/payments/tools/hapg"
	"github.com/example/payments/tools/pgbouncer"
)

// Profile is how long and how hard a run is.
type Profile struct {
	Name string
	// Load is how long operations are sent; Clients how many goroutines send.
	Load    time.Duration
	Clients int
	// KillEvery is how often a random process is SIGKILLed and restarted.
	KillEvery time.Duration
	// OutageEvery and Outage: the processor is cut off for Outage, longer
	// than a worker's retry budget, every OutageEvery from the first third
	// of the load on (at least once).
	OutageEvery, Outage time.Duration
	// Quiesce bounds the wait for every operation to settle.
	Quiesce time.Duration
	// TarpitEvery is how often the tarpit tenant pays (tarpit.go), and
	// DeliveryBound how soon after its creation every event of the other
	// tenants must be delivered all the same.
	TarpitEvery, DeliveryBound time.Duration
	// PoolerConns, when set, puts PgBouncer in transaction mode between the
	// APIs and workers and Postgres, with that many server connections (fewer
	// than its clients'), killed and restarted every PoolerKillEvery if set.
	// On a Patroni pair it reaches the primary through HAProxy.
	PoolerConns     int
	PoolerKillEvery time.Duration
	// FirstPrimaryKill, when set, runs the stack on a Patroni pair in
	// synchronous mode (tools/hapg) and SIGKILLs its primary at that point
	// of the load, then every PrimaryKillEvery once the killed node is back
	// as the synchronous standby; the run must see MinFailovers.
	FirstPrimaryKill, PrimaryKillEvery time.Duration
	MinFailovers                       int
	// Stripe runs the service on its Stripe adapter against the Stripe
	// simulator (stripe.go) instead of the fake processor.
	Stripe bool
	// PartitionFor, when set, puts Toxiproxy between each API and worker
	// and Postgres (partition.go) and, over and over, leaves the links as
	// they are for half of PartitionEvery, slows every link for the other
	// half, then cuts a worker's link for PartitionFor.
	PartitionEvery, PartitionFor time.Duration
}

// Profiles are the runs by name: short for CI, long for the proof by hand.
var Profiles = map[string]Profile{
	"short": {Name: "short", Load: 75 * time.Second, Clients: 32, KillEvery: 4 * time.Second,
		OutageEvery: time.Hour, Outage: 20 * time.Second, Quiesce: 3 * time.Minute,
		TarpitEvery: time.Second, DeliveryBound: 30 * time.Second},
	"pooler": {Name: "pooler", Load: 75 * time.Second, Clients: 32, KillEvery: 4 * time.Second,
		OutageEvery: time.Hour, Outage: 20 * time.Second, Quiesce: 3 * time.Minute,
		TarpitEvery: time.Second, DeliveryBound: 30 * time.Second, PoolerConns: 8, PoolerKillEvery: 15 * time.Second},
	"failover": {Name: "failover", Load: 110 * time.Second, Clients: 16, KillEvery: 4 * time.Second,
		OutageEvery: time.Hour, Outage: 20 * time.Second, Quiesce: 3 * time.Minute,
		TarpitEvery: time.Second, DeliveryBound: 30 * time.Second, PoolerConns: 8,
		FirstPrimaryKill: 15 * time.Second, PrimaryKillEvery: 30 * time.Second, MinFailovers: 3},
	"partition": {Name: "partition", Load: 110 * time.Second, Clients: 32, KillEvery: 4 * time.Second,
		OutageEvery: time.Hour, Outage: 20 * time.Second, Quiesce: 3 * time.Minute,
		TarpitEvery: time.Second, DeliveryBound: 30 * time.Second, PartitionEvery: 16 * time.Second, PartitionFor: 25 * time.Second},
	"stripe": {Name: "stripe", Load: 75 * time.Second, Clients: 32, KillEvery: 4 * time.Second,
		OutageEvery: time.Hour, Outage: 20 * time.Second, Quiesce: 4 * time.Minute,
		TarpitEvery: time.Second, DeliveryBound: 30 * time.Second, Stripe: true},
	"long": {Name: "long", Load: 30 * time.Minute, Clients: 48, KillEvery: 6 * time.Second,
		OutageEvery: 8 * time.Minute, Outage: 25 * time.Second, Quiesce: 10 * time.Minute,
		TarpitEvery: 15 * time.Second, DeliveryBound: 30 * time.Second},
}

// Config is one run.
type Config struct {
	Profile Profile
	// Seed makes a run's choices repeatable (the operations, their keys,
	// which process dies when); the machine's timing still varies.
	Seed uint64
	// DatabaseURL names the server; the run creates its own database there.
	DatabaseURL string
	// Bin holds the api, worker and processor binaries.
	Bin string
	// Logs is where every process's log is kept, for the post-mortem.
	Logs string
	// KeepDatabase keeps the run's database even when the run passes.
	KeepDatabase bool
}

// The workers' timing: fast retries and a short budget, so that the
// reconciler and its fence do real work within a run.
const (
	jobTimeout        = 3 * time.Second
	operationDeadline = 30 * time.Second
)

// stack is the running processes of a run.
type stack struct {
	cfg       Config
	procs     []*proc
	processor *proc
	// processorAddr is where the processor listens.
	processorAddr string
	apiURLs       [2]string
	rng           *rand.Rand
	kills         map[string]*atomic.Int64
	outageN       atomic.Int64
	outage        atomic.Bool
	outageLog     []window
	outageMu      sync.Mutex
	// webhookSecret signs the processor's webhooks, and the injector's.
	webhookSecret string
	// receiver takes the tenants' webhooks, recording each event it
	// processed in receiverSeen; receiverDown counts its outages.
	receiver     *proc
	receiverSeen string
	receiverDown atomic.Int64
	// tarpit holds every attempt to the tarpit tenant's endpoints.
	tarpit *tarpit
	// downs are the times the run itself held merchant deliveries up:
	// workers and the receiver killed, the receiver taken down.
	downs records[down]
	// failoverLog is the primary's kills (failover profile).
	failoverLog records[Failover]
}

// window is a time span, such as an outage.
type window struct{ from, to time.Time }

// Run runs one chaos run and reports it on out. The error is non-nil when the
// run could not be made; violations are in the Summary.
func Run(ctx context.Context, cfg Config, out io.Writer) (*Summary, error) {
	started := time.Now()
	runName := fmt.Sprintf("chaos_%d_%d", cfg.Seed, started.Unix())
	if cfg.Logs == "" {
		cfg.Logs = filepath.Join("chaos-logs", runName)
	}
	if err := os.MkdirAll(cfg.Logs, 0o755); err != nil {
		return nil, err
	}
	var cluster *hapg.Cluster
	if cfg.Profile.FirstPrimaryKill > 0 {
		var err error
		if cluster, err = startCluster(ctx, cfg); err != nil {
			return nil, err
		}
		defer stopCluster(cfg, cluster)
		cfg.DatabaseURL = cluster.URL()
		fmt.Fprintf(out, "chaos: on a Patroni pair in synchronous mode, through %s\n", redacted(cluster.URL()))
	}
	dbURL, drop, pool, err := freshDatabase(ctx, cfg, runName, out)
	if err != nil {
		return nil, err
	}
	defer pool.Close()

	// The APIs and workers reach Postgres through the pooler, when the
	// profile has one, and what needs a session past it; or each through a
	// link of its own.
	serviceDB := func(string) []string { return []string{"DATABASE_URL=" + dbURL} }
	var bouncer *pgbouncer.Bouncer
	if cfg.Profile.PoolerConns > 0 {
		var pooled []string
		if bouncer, pooled, err = startPooler(cfg, dbURL, cluster); err != nil {
			return nil, err
		}
		defer stopPooler(cfg, bouncer)
		serviceDB = func(string) []string { return pooled }
		fmt.Fprintf(out, "chaos: through PgBouncer in transaction mode at %s, %d server connections\n", bouncer.Addr, cfg.Profile.PoolerConns)
	}
	var ls *links
	if cfg.Profile.PartitionFor > 0 {
		if ls, serviceDB, err = startLinks(dbURL, pool); err != nil {
			return nil, err
		}
		defer ls.close()
		fmt.Fprintf(out, "chaos: each API and worker through a Toxiproxy link of its own: %s as is, %s with every link slowed, then a worker's cut for %s, over again\n",
			cfg.Profile.PartitionEvery/2, cfg.Profile.PartitionEvery/2, cfg.Profile.PartitionFor)
	}

	// Every process the run starts is stopped on every way out of it: here
	// (the deferred stopAll, on success, failure, and SIGINT or SIGTERM,
	// which end ctx), and by the kernel if the run itself dies (proc).
	s, err := startStack(ctx, cfg, dbURL, serviceDB)
	if err != nil {
		return nil, err
	}
	defer s.stopAll()
	if err := s.startReceiver(ctx); err != nil {
		return nil, err
	}
	if err := s.startTarpit(ctx); err != nil {
		return nil, err
	}

	inj := &injector{apiURLs: s.apiURLs, pool: pool, rng: rand.New(rand.NewPCG(cfg.Seed, 11)), client: &http.Client{Timeout: 10 * time.Second}}
	methods := fakeMethods
	if cfg.Profile.Stripe {
		methods, inj.event = stripeMethods, stripeEvent
		inj.signer, inj.forger = stripeSigner{s.webhookSecret}, stripeSigner{"whsec_forged"}
	} else {
		secrets, err := signing.ParseSecrets(s.webhookSecret)
		if err != nil {
			return nil, err
		}
		other, _ := signing.ParseSecrets(signing.NewSecret())
		inj.event, inj.signer, inj.forger = fakeEvent, standardSigner{secrets}, standardSigner{other}
	}
	l := newLoad(s.apiURLs, cfg.Seed, methods)
	s.underLoad(ctx, l, inj, bouncer, cluster, ls, out, started)
	loadEnd := time.Now()
	// Interrupted (SIGINT, SIGTERM): stop, without a verdict.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted: %w", err)
	}
	if err := s.ensureUp(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "chaos: load done after %s: %d operations; waiting for quiescence\n", time.Since(started).Round(time.Second), len(l.all()))

	quiesceStart := time.Now()
	quiet := settle(ctx, l, pool, cfg.Profile.Quiesce)
	sum := s.summary(runName, time.Since(quiesceStart), quiet, l, inj)
	sum.Path = path(cfg.Profile, cluster)
	if cfg.Profile.Stripe {
		if sum.Stripe, err = loadSimulatorState(ctx, pool, s.processorAddr); err != nil {
			return nil, err
		}
	}
	if err := check(ctx, pool, l, s.outageWindows(), s.receiverSeen, cfg.Profile.DeliveryBound, s.downs.all(), sum); err != nil {
		return nil, err
	}
	if cluster != nil {
		sum.Failovers = served(s.failoverLog.all(), l.rec, loadEnd)
		sum.Invariants = append(sum.Invariants, Invariant{
			Name:       fmt.Sprintf("the primary killed at least %d times, a standby taking writes each time", cfg.Profile.MinFailovers),
			Violations: checkFailovers(sum.Failovers, cfg.Profile.MinFailovers)})
	}
	if ls != nil {
		sum.Partitions, sum.Slowed = ls.log.all(), len(ls.slowed.all())
		sum.Invariants = append(sum.Invariants, Invariant{
			Name:       fmt.Sprintf("a cut worker's presence given up within %s, taken back within %s of the heal", givenUpBound, retakenBound),
			Violations: checkPartitions(sum.Partitions)})
	}
	sum.Print(out)
	if sum.Passed() && !cfg.KeepDatabase {
		s.stopAll()
		pool.Close()
		drop()
	}
	return sum, nil
}

// freshDatabase creates the run's database, migrated and seeded by the API's
// own commands, with the tarpit's tenant, and returns its URL, what drops it
// and a pool on it.
func freshDatabase(ctx context.Context, cfg Config, runName string, out io.Writer) (string, func(), *pgxpool.Pool, error) {
	dbURL, drop, err := database.CreateFresh(ctx, cfg.DatabaseURL, runName)
	if err != nil {
		return "", nil, nil, err
	}
	fmt.Fprintf(out, "chaos: profile %s, seed %d, database %s, logs in %s\n", cfg.Profile.Name, cfg.Seed, runName, cfg.Logs)
	if err := waitReachable(ctx, dbURL); err != nil {
		return "", nil, nil, err
	}
	for _, args := range [][]string{{"migrate"}, {"seed"}} {
		cmd := exec.CommandContext(ctx, filepath.Join(cfg.Bin, "api"), args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "APP_ENV=development")
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", nil, nil, fmt.Errorf("api %s: %w\n%s", args[0], err, b)
		}
	}
	pool, err := database.Connect(ctx, dbURL, 0)
	if err != nil {
		return "", nil, nil, err
	}
	if err := createTarpitTenant(ctx, pool); err != nil {
		pool.Close()
		return "", nil, nil, err
	}
	return dbURL, drop, pool, nil
}

// underLoad sends the load for the profile's Load, and does to the stack
// meanwhile all the profile asks: kills, outages, injected webhooks.
func (s *stack) underLoad(ctx context.Context, l *load, inj *injector, bouncer *pgbouncer.Bouncer, cluster *hapg.Cluster, ls *links, out io.Writer, started time.Time) {
	loadCtx, stopLoad := context.WithTimeout(ctx, s.cfg.Profile.Load)
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Go(func() { s.kill(loadCtx) })
	if bouncer != nil {
		wg.Go(func() { s.killPooler(loadCtx, bouncer) })
	}
	if cluster != nil {
		wg.Go(func() { s.failovers(loadCtx, cluster) })
	}
	if ls != nil {
		wg.Go(func() { s.partitions(loadCtx, ls) })
	}
	wg.Go(func() { s.outages(loadCtx) })
	wg.Go(func() { inj.run(loadCtx) })
	wg.Go(func() { s.receiverOutage(loadCtx) })
	wg.Go(func() { l.tarpitPayments(loadCtx, s.cfg.Profile.TarpitEvery) })
	wg.Go(func() { progress(loadCtx, out, started, s.cfg.Profile.Load, l, s) })
	l.run(loadCtx, s.cfg.Profile.Clients)
	wg.Wait()
}

// summary is what the run did, before its checks: the load sent, the
// kills and outages, the webhooks injected, the tarpit's attempts.
func (s *stack) summary(runName string, quiesce time.Duration, quiet bool, l *load, inj *injector) *Summary {
	cfg := s.cfg
	sum := &Summary{Profile: cfg.Profile.Name, Seed: cfg.Seed, Logs: cfg.Logs, Database: runName, Load: cfg.Profile.Load,
		Quiesce: quiesce, Quiet: quiet, Kills: map[string]int64{}, Outages: s.outageN.Load(),
		Requests: l.sent.Load(), Dups: l.dups.Load(), Resends: l.resends.Load(), Async: l.async.Load()}
	for kind, n := range s.kills {
		sum.Kills[kind] = n.Load()
	}
	sum.ReceiverKills, sum.ReceiverOutages = s.kills["receiver"].Load(), s.receiverDown.Load()
	sum.Injected = Injected{Contradictions: inj.contradictions.Load(), Unknown: inj.unknown.Load(), Refused: inj.refused.Load(), Wrong: inj.wrong}
	sum.Tarpit = s.tarpit.stats()
	return sum
}

// startStack starts the processor, two APIs and two workers; the APIs and
// workers reach the database with serviceDB's settings for each.
func startStack(ctx context.Context, cfg Config, dbURL string, serviceDB func(proc string) []string) (*stack, error) {
	s := &stack{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 7)), kills: map[string]*atomic.Int64{}}
	for _, kind := range []string{"api", "worker", "processor", "pooler", "primary"} {
		s.kills[kind] = new(atomic.Int64)
	}
	addr := func() string {
		a, err := freePort()
		if err != nil {
			panic(err) // the loopback always has a free port
		}
		return a
	}
	common := []string{"LOG_FORMAT=json", "SHUTDOWN_TIMEOUT=5s"}
	service := func(proc string) []string { return append(append([]string{}, common...), serviceDB(proc)...) }
	common = append(common, "DATABASE_URL="+dbURL)
	key := make([]byte, 32)
	_, _ = crand.Read(key) // never fails, per crypto/rand
	// The API and the worker share the key of the endpoints' secrets, and
	// the run's receiver listens on loopback.
	webhooks := []string{"WEBHOOK_SECRETS_KEY=" + base64.StdEncoding.EncodeToString(key), "WEBHOOK_ALLOW_PRIVATE_NETWORKS=true"}
	s.webhookSecret = signing.NewSecret()
	var apiAddrs [2]string
	for i := range apiAddrs {
		apiAddrs[i] = addr()
		s.apiURLs[i] = "http://" + apiAddrs[i]
	}
	procAddr := addr()
	s.processorAddr = procAddr
	var err error
	// The processor's webhooks go to the first API, dropped, duplicated and
	// delayed out of order; when that API is down they are retried. The
	// APIs verify them, and the workers call the processor, as its adapter
	// says.
	var apiProcessor, workerProcessor []string
	if cfg.Profile.Stripe {
		s.webhookSecret = "whsec_" + s.webhookSecret
		s.processor, err = newSimulator(cfg, procAddr, s.apiURLs[0]+"/v1/processor/webhooks", s.webhookSecret)
		apiProcessor = []string{"PROCESSOR=stripe", "STRIPE_WEBHOOK_SECRET=" + s.webhookSecret}
		workerProcessor = []string{"PROCESSOR=stripe", "STRIPE_API_BASE=http://" + procAddr, "STRIPE_API_KEY=" + simAPIKey,
			fmt.Sprintf("PROCESSOR_RATE_LIMIT=%d", simRateLimit*9/10)}
	} else {
		s.processor, err = newProc("processor", "processor", filepath.Join(cfg.Bin, "fakeprocessor"), cfg.Logs, "http://"+procAddr+"/healthz",
			append(common, "PROCESSOR_ADDR="+procAddr, "PROCESSOR_INTERNAL_ADDR=127.0.0.1:0", "PROCESSOR_FAIL_RATE=0.1", "PROCESSOR_DROP_RATE=0.05",
				"PROCESSOR_LATENCY=2ms", "PROCESSOR_EXEC_LATENCY=10ms", "PROCESSOR_TIMEOUT_HANG=2s",
				"PROCESSOR_WEBHOOK_URL="+s.apiURLs[0]+"/v1/processor/webhooks", "PROCESSOR_WEBHOOK_SECRET="+s.webhookSecret,
				"PROCESSOR_WEBHOOK_DROP_RATE=0.1", "PROCESSOR_WEBHOOK_DUPLICATE_RATE=0.1", "PROCESSOR_WEBHOOK_DELAY=500ms"))
		apiProcessor = []string{"PROCESSOR_WEBHOOK_SECRET=" + s.webhookSecret}
		workerProcessor = []string{"PROCESSOR_URL=http://" + procAddr}
	}
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, s.processor)
	for i, a := range apiAddrs {
		name := fmt.Sprintf("api-%d", i+1)
		p, err := newProc(name, "api", filepath.Join(cfg.Bin, "api"), cfg.Logs, s.apiURLs[i]+"/healthz",
			append(append(append(service(name), webhooks...), apiProcessor...), "API_ADDR="+a, "API_INTERNAL_ADDR=127.0.0.1:0", "TENANT_RATE_LIMIT=0",
				"IDEMPOTENCY_DEFAULT_WAIT=2s", "IDEMPOTENCY_MAX_WAIT=3s", "IDEMPOTENCY_LOCK_TIMEOUT=5s"))
		if err != nil {
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	for i := range 2 {
		m := addr()
		name := fmt.Sprintf("worker-%d", i+1)
		p, err := newProc(name, "worker", filepath.Join(cfg.Bin, "worker"), cfg.Logs, "http://"+m+"/healthz",
			append(append(append(service(name), webhooks...), workerProcessor...), "METRICS_ADDR="+m, "WORKER_POLL_INTERVAL=100ms",
				"PROCESSOR_TIMEOUT=1s", "JOB_TIMEOUT="+jobTimeout.String(), "RETRY_BASE_DELAY=100ms", "RETRY_MAX_DELAY=1s",
				"OPERATION_MAX_ATTEMPTS=4", "OPERATION_DEADLINE="+operationDeadline.String(), "RECONCILE_INTERVAL=1s",
				"RECONCILE_STUCK_AFTER=5s", "RECONCILE_TIMEOUT=10s", "WEBHOOK_RETRY_SCHEDULE="+receiverSchedule))
		if err != nil {
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	for _, p := range s.procs {
		if err := p.start(ctx); err != nil {
			s.stopAll()
			return nil, err
		}
	}
	return s, nil
}

// kill SIGKILLs a random process every KillEvery and restarts it, until ctx
// ends. The processor is left alone while it is cut off, and Stripe always
// (it keeps its state).
func (s *stack) kill(ctx context.Context) {
	timer.Every(ctx, s.cfg.Profile.KillEvery, func() {
		p := s.procs[s.rng.IntN(len(s.procs))]
		if p == s.processor && s.cfg.Profile.Stripe {
			return
		}
		if !p.turn.TryLock() {
			return // down on purpose already (an outage)
		}
		s.restart(ctx, p)
		p.turn.Unlock()
	})
}

// restart kills p and starts it again; the caller holds p.turn.
func (s *stack) restart(ctx context.Context, p *proc) {
	from := time.Now()
	p.kill()
	s.kills[p.kind].Add(1)
	startAgain(ctx, p)
	if p.kind == "worker" || p.kind == "receiver" {
		s.downs.add(down{window: window{from, time.Now()}, worker: p.kind == "worker"})
	}
}

// startAgain starts p again, whatever ctx says, until it starts or a minute
// has passed: a worker cannot start while no primary takes writes (its
// presence needs one, database.Presence), nor the fake processor (it pings
// its database).
func startAgain(ctx context.Context, p *proc) {
	err := p.start(context.WithoutCancel(ctx))
	for deadline := time.Now().Add(time.Minute); err != nil && time.Now().Before(deadline); {
		fmt.Fprintf(p.log, "=== chaos: restart failed, again in a second: %v\n", err)
		time.Sleep(time.Second)
		err = p.start(context.WithoutCancel(ctx))
	}
	if err != nil {
		fmt.Fprintf(p.log, "=== chaos: restart failed: %v\n", err)
	}
}

// outages cuts the processor off for Outage, from a third of the load on and
// then every OutageEvery: it is killed and started again only afterwards, so
// every call meanwhile has an unknown outcome and retry budgets run out.
func (s *stack) outages(ctx context.Context) {
	next := time.After(s.cfg.Profile.Load / 3)
	for {
		select {
		case <-ctx.Done():
			return
		case <-next:
		}
		next = time.After(s.cfg.Profile.OutageEvery)
		s.processor.turn.Lock()
		from := time.Now()
		s.outage.Store(true)
		s.outageN.Add(1)
		if s.cfg.Profile.Stripe {
			if err := simulatorOutage(ctx, s.processorAddr, s.cfg.Profile.Outage); err != nil {
				fmt.Fprintf(s.processor.log, "=== chaos: outage: %v\n", err)
			}
			sleep(ctx, s.cfg.Profile.Outage)
		} else {
			s.processor.kill()
			sleep(ctx, s.cfg.Profile.Outage)
			startAgain(ctx, s.processor)
		}
		s.outage.Store(false)
		s.outageMu.Lock()
		s.outageLog = append(s.outageLog, window{from, time.Now()})
		s.outageMu.Unlock()
		s.processor.turn.Unlock()
	}
}

func (s *stack) outageWindows() []window {
	s.outageMu.Lock()
	defer s.outageMu.Unlock()
	return append([]window(nil), s.outageLog...)
}

// ensureUp starts again any process that is down.
func (s *stack) ensureUp(ctx context.Context) error {
	for _, p := range s.procs {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.mu.Lock()
		done := p.done
		p.mu.Unlock()
		select {
		case <-done:
			if err := p.start(ctx); err != nil {
				return err
			}
		default:
		}
	}
	return nil
}

// stopAll stops every process of the stack (SIGTERM, then SIGKILL after
// a while) and the tarpit.
func (s *stack) stopAll() {
	var wg sync.WaitGroup
	for _, p := range s.procs {
		wg.Go(p.stop)
	}
	if s.tarpit != nil {
		s.tarpit.close()
	}
	wg.Wait()
}

// progress prints a line every five seconds while the load runs.
func progress(ctx context.Context, out io.Writer, started time.Time, total time.Duration, l *load, s *stack) {
	timer.Every(ctx, 5*time.Second, func() {
		outage := ""
		if s.outage.Load() {
			outage = " | PROCESSOR CUT OFF"
		}
		if n := s.kills["primary"].Load(); n > 0 {
			outage = fmt.Sprintf(", primary %d%s", n, outage)
		}
		fmt.Fprintf(out, "chaos %s/%s: %d operations, %d requests (%d duplicate sends, %d refunds) | kills: api %d, worker %d, processor %d%s\n",
			time.Since(started).Round(time.Second), total, len(l.all()), l.sent.Load(), l.dups.Load(), l.refunds.Load(),
			s.kills["api"].Load(), s.kills["worker"].Load(), s.kills["processor"].Load(), outage)
	})
}
