// etcd-concurrency drives etcd's own Go client (go.etcd.io/etcd/client/v3) and its
// concurrency package against an etcd v3 endpoint list and checks what the recipes
// guarantee, not only that the calls return:
//
//	mutex     concurrency.Mutex: several clients, each with its own client and session,
//	          take turns in a critical section; no two are ever inside at once, every
//	          holder's lock key is the oldest under the prefix, the lock keys' create
//	          revisions (fencing tokens) strictly increase in the order of acquisition, a
//	          read-modify-write counter guarded by IsOwner() loses no update, and TryLock
//	          is refused while the lock is held.
//	election  concurrency.Election: candidates campaign at once; exactly one leads at a
//	          time, Leader() names it, an observer (Observe) sees every leader and every
//	          proclaimed value in order, Resign (and closing the leader's session) hands
//	          leadership to the next, and a resigned leader can no longer Proclaim.
//	stm       concurrency.NewSTM: concurrent transfers between accounts under serializable,
//	          snapshot and repeatable-read isolation keep the total constant, as seen by
//	          auditors reading every account in one snapshot while the transfers run.
//	expiry    a session whose lease is revoked loses its lock (its key is gone, a write
//	          fenced by IsOwner() is refused, the session reports done) and the waiting
//	          client acquires; a session that stops its keep-alives loses the lock once
//	          its TTL runs out.
//
// Every wait is bounded. Success prints one "ok" line per check and "PASS"; the first
// failure prints one line "FAIL <check>: <reason>" on stderr and exits 1.
//
// Usage: etcd-concurrency --endpoints http://127.0.0.1:2379,... [--checks mutex,election,stm,expiry]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// opTimeout bounds one request or one wait for an event; checkTimeout one whole check.
const (
	opTimeout    = 20 * time.Second
	checkTimeout = 90 * time.Second
	dialTimeout  = 5 * time.Second
	sessionTTL   = 10
)

var (
	endpoints []string
	verbose   bool
)

// failure is a check's one-line reason.
type failure struct{ reason string }

func (f failure) Error() string { return f.reason }

func failf(format string, args ...any) error { return failure{fmt.Sprintf(format, args...)} }

func main() {
	eps := flag.String("endpoints", "", "comma-separated client URLs (http://host:port)")
	checks := flag.String("checks", "mutex,election,stm,expiry", "checks to run, in order")
	prefix := flag.String("prefix", "", "key prefix (default: /coordbench-interop/<pid>-<time>/)")
	flag.BoolVar(&verbose, "v", false, "client logs on stderr")
	flag.Parse()
	if *eps == "" {
		fmt.Fprintln(os.Stderr, "FAIL usage: --endpoints is required")
		os.Exit(2)
	}
	endpoints = strings.Split(*eps, ",")
	root := *prefix
	if root == "" {
		root = fmt.Sprintf("/coordbench-interop/%d-%d/", os.Getpid(), time.Now().UnixNano())
	}
	all := map[string]func(string) (string, error){
		"mutex":    checkMutex,
		"election": checkElection,
		"stm":      checkSTM,
		"expiry":   checkExpiry,
	}
	start := time.Now()
	for _, name := range strings.Split(*checks, ",") {
		check, ok := all[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "FAIL usage: unknown check %q\n", name)
			os.Exit(2)
		}
		began := time.Now()
		// A check that hangs despite its bounded waits still ends the program.
		watchdog := time.AfterFunc(checkTimeout, func() {
			fmt.Fprintf(os.Stderr, "FAIL %s: did not finish within %s\n", name, checkTimeout)
			os.Exit(1)
		})
		detail, err := check(root + name + "/")
		watchdog.Stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL %s: %s\n", name, oneLine(err.Error()))
			os.Exit(1)
		}
		fmt.Printf("ok %s (%.1fs): %s\n", name, time.Since(began).Seconds(), detail)
	}
	fmt.Printf("PASS (%.1fs)\n", time.Since(start).Seconds())
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// newClient is one client of its own (its own connections, keep-alives and watches) to
// every endpoint.
func newClient() (*clientv3.Client, error) { return newClientTo(endpoints) }

// newClientTo is a client of the endpoints eps only.
func newClientTo(eps []string) (*clientv3.Client, error) {
	logger := zap.NewNop()
	if verbose {
		logger, _ = zap.NewDevelopment()
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: dialTimeout,
		Logger:      logger,
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to %v: %w", eps, err)
	}
	// clientv3.New does not wait for a connection: ask once so a dead endpoint list
	// fails here, in one line.
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := c.Get(ctx, "/coordbench-interop/ping"); err != nil {
		c.Close()
		return nil, fmt.Errorf("first request to %v: %w", eps, err)
	}
	return c, nil
}

// member is one participant: its own client and session.
type member struct {
	client  *clientv3.Client
	session *concurrency.Session
}

func newMember(ttl int) (*member, error) {
	c, err := newClient()
	if err != nil {
		return nil, err
	}
	// The lease is granted here, bounded; NewSession then only starts its keep-alives,
	// which run until the session is closed.
	ctx, cancel := opCtx()
	defer cancel()
	lease, err := c.Grant(ctx, int64(ttl))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("granting a session lease (TTL %ds): %w", ttl, err)
	}
	s, err := concurrency.NewSession(c, concurrency.WithLease(lease.ID), concurrency.WithTTL(ttl))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("NewSession: %w", err)
	}
	return &member{client: c, session: s}, nil
}

func newMembers(n, ttl int) ([]*member, error) {
	var ms []*member
	for i := 0; i < n; i++ {
		m, err := newMember(ttl)
		if err != nil {
			closeMembers(ms)
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func (m *member) close() {
	if m.session != nil {
		m.session.Close()
	}
	m.client.Close()
}

func closeMembers(ms []*member) {
	for _, m := range ms {
		m.close()
	}
}

func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// createRevision is the create revision of key, 0 if it does not exist.
func createRevision(c *clientv3.Client, key string) (int64, error) {
	ctx, cancel := opCtx()
	defer cancel()
	resp, err := c.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return resp.Kvs[0].CreateRevision, nil
}

// firstErr collects the first error of several goroutines.
type firstErr struct {
	once   sync.Once
	err    error
	failed atomic.Bool
}

func (f *firstErr) set(err error) {
	if err != nil {
		f.once.Do(func() { f.err = err; f.failed.Store(true) })
	}
}

// eachMember runs f for every member, each on a goroutine of its own, and returns the
// first error; failed is set once one has failed, for loops to stop early.
func eachMember(ms []*member, f func(i int, m *member, failed *atomic.Bool) error) error {
	var (
		errs firstErr
		wg   sync.WaitGroup
	)
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs.set(f(i, m, &errs.failed))
		}()
	}
	wg.Wait()
	return errs.err
}

// ---------------------------------------------------------------------------------------
// mutex

const (
	mutexClients = 5
	mutexRounds  = 6
)

func checkMutex(pfx string) (string, error) {
	ms, err := newMembers(mutexClients, sessionTTL)
	if err != nil {
		return "", err
	}
	defer closeMembers(ms)
	lockPfx, counterKey := pfx+"lock", pfx+"counter"

	var (
		inside   atomic.Int32
		overlaps atomic.Int32
		mu       sync.Mutex
		fences   []int64
	)
	record := func(rev int64) {
		mu.Lock()
		fences = append(fences, rev)
		mu.Unlock()
	}
	err = eachMember(ms, func(i int, m *member, failed *atomic.Bool) error {
		mutex := concurrency.NewMutex(m.session, lockPfx)
		for r := 0; r < mutexRounds && !failed.Load(); r++ {
			if err := mutexRound(i, m, mutex, lockPfx, counterKey, &inside, &overlaps, record); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if n := overlaps.Load(); n > 0 {
		return "", failf("%d times a client entered the critical section while another was inside", n)
	}
	want := mutexClients * mutexRounds
	if len(fences) != want {
		return "", failf("%d acquisitions recorded, want %d", len(fences), want)
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			return "", failf("fencing tokens (lock key create revisions) not increasing at acquisition %d: %d after %d (all: %v)", i, fences[i], fences[i-1], fences)
		}
	}
	ctx, cancel := opCtx()
	defer cancel()
	resp, err := ms[0].client.Get(ctx, counterKey)
	if err != nil {
		return "", fmt.Errorf("reading the counter: %w", err)
	}
	if len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != strconv.Itoa(want) {
		return "", failf("counter incremented under the lock is %v, want %d: an update was lost", kvValue(resp), want)
	}
	left, err := ms[0].client.Get(ctx, lockPfx+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return "", err
	}
	if left.Count != 0 {
		return "", failf("%d lock keys left after every holder unlocked", left.Count)
	}
	if err := tryLockRefused(ms, lockPfx); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d clients x %d rounds, no overlap, fencing tokens %d..%d strictly increasing, guarded counter %d, TryLock refused while held",
		mutexClients, mutexRounds, fences[0], fences[len(fences)-1], want), nil
}

// mutexRound takes the lock once, checks what holding it means, and releases it.
func mutexRound(i int, m *member, mutex *concurrency.Mutex, lockPfx, counterKey string,
	inside, overlaps *atomic.Int32, record func(int64)) error {
	ctx, cancel := opCtx()
	defer cancel()
	if err := mutex.Lock(ctx); err != nil {
		return fmt.Errorf("client %d Lock: %w", i, err)
	}
	if inside.Add(1) != 1 {
		overlaps.Add(1)
	}
	// The holder's key is the oldest under the prefix, and its create revision is the
	// fencing token.
	owner, err := m.client.Get(ctx, lockPfx+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return fmt.Errorf("client %d reading the owner: %w", i, err)
	}
	if len(owner.Kvs) == 0 || string(owner.Kvs[0].Key) != mutex.Key() {
		return failf("client %d holds the lock with key %s but the oldest key under the prefix is %v", i, mutex.Key(), kvKey(owner))
	}
	rev := owner.Kvs[0].CreateRevision
	record(rev)
	// Read, pause, write: only mutual exclusion keeps this from losing updates; the
	// write is fenced by IsOwner() (the lock key's create revision).
	cur, err := m.client.Get(ctx, counterKey)
	if err != nil {
		return fmt.Errorf("client %d reading the counter: %w", i, err)
	}
	n := 0
	if len(cur.Kvs) > 0 {
		n, _ = strconv.Atoi(string(cur.Kvs[0].Value))
	}
	time.Sleep(time.Duration(2+rand.Intn(8)) * time.Millisecond)
	put, err := m.client.Txn(ctx).If(mutex.IsOwner()).Then(clientv3.OpPut(counterKey, strconv.Itoa(n+1))).Commit()
	if err != nil {
		return fmt.Errorf("client %d fenced write: %w", i, err)
	}
	if !put.Succeeded {
		return failf("client %d holds the lock but its IsOwner() compare failed (key %s, create revision %d)", i, mutex.Key(), rev)
	}
	inside.Add(-1)
	if err := mutex.Unlock(ctx); err != nil {
		return fmt.Errorf("client %d Unlock: %w", i, err)
	}
	return nil
}

// tryLockRefused: while one session holds the lock, another's TryLock returns ErrLocked
// and leaves no key behind; after the release it succeeds.
func tryLockRefused(ms []*member, lockPfx string) error {
	ctx, cancel := opCtx()
	defer cancel()
	a := concurrency.NewMutex(ms[0].session, lockPfx)
	b := concurrency.NewMutex(ms[1].session, lockPfx)
	if err := a.Lock(ctx); err != nil {
		return fmt.Errorf("Lock for TryLock: %w", err)
	}
	if err := b.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		return failf("TryLock while another session holds the lock returned %v, want %v", err, concurrency.ErrLocked)
	}
	keys, err := ms[0].client.Get(ctx, lockPfx+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	if keys.Count != 1 {
		return failf("after a refused TryLock %d keys are under the lock prefix, want 1 (the holder's)", keys.Count)
	}
	if err := a.Unlock(ctx); err != nil {
		return fmt.Errorf("Unlock: %w", err)
	}
	if err := b.TryLock(ctx); err != nil {
		return failf("TryLock of a free lock: %v", err)
	}
	return b.Unlock(ctx)
}

func kvKey(r *clientv3.GetResponse) string {
	if r == nil || len(r.Kvs) == 0 {
		return "(none)"
	}
	return string(r.Kvs[0].Key)
}

func kvValue(r *clientv3.GetResponse) string {
	if r == nil || len(r.Kvs) == 0 {
		return "(none)"
	}
	return string(r.Kvs[0].Value)
}

// ---------------------------------------------------------------------------------------
// election

const electionCandidates = 3

// observed is what an Observe channel delivered, in order.
type observed struct {
	mu     sync.Mutex
	cond   *sync.Cond
	values []string
	closed bool
}

func newObserved() *observed {
	o := &observed{}
	o.cond = sync.NewCond(&o.mu)
	return o
}

func (o *observed) run(ch <-chan clientv3.GetResponse) {
	for resp := range ch {
		o.mu.Lock()
		for _, kv := range resp.Kvs {
			o.values = append(o.values, string(kv.Value))
		}
		o.mu.Unlock()
		o.cond.Broadcast()
	}
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.cond.Broadcast()
}

// waitFor waits until the last value observed is want.
func (o *observed) waitFor(want string) error {
	timer := time.AfterFunc(opTimeout, o.cond.Broadcast)
	defer timer.Stop()
	deadline := time.Now().Add(opTimeout)
	o.mu.Lock()
	defer o.mu.Unlock()
	for {
		if n := len(o.values); n > 0 && o.values[n-1] == want {
			return nil
		}
		if o.closed {
			return failf("the Observe channel closed before %q arrived (observed %v)", want, o.values)
		}
		if time.Now().After(deadline) {
			return failf("the observer did not see %q within %s (observed %v)", want, opTimeout, o.values)
		}
		o.cond.Wait()
	}
}

func (o *observed) snapshot() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.values...)
}

func checkElection(pfx string) (string, error) {
	electionPfx := pfx + "leader"
	ms, err := newMembers(electionCandidates, sessionTTL)
	if err != nil {
		return "", err
	}
	defer closeMembers(ms)
	watcher, err := newMember(sessionTTL)
	if err != nil {
		return "", err
	}
	defer watcher.close()
	view := concurrency.NewElection(watcher.session, electionPfx)

	obsCtx, stopObserving := context.WithCancel(context.Background())
	defer stopObserving()
	obs := newObserved()
	go obs.run(view.Observe(obsCtx))

	var (
		leaders  atomic.Int32
		mu       sync.Mutex
		order    []int
		handover []time.Duration
		released time.Time
	)
	err = eachMember(ms, func(i int, m *member, _ *atomic.Bool) error {
		e := concurrency.NewElection(m.session, electionPfx)
		value := fmt.Sprintf("candidate-%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 3*opTimeout)
		defer cancel()
		if err := e.Campaign(ctx, value); err != nil {
			return fmt.Errorf("candidate %d Campaign: %w", i, err)
		}
		if n := leaders.Add(1); n != 1 {
			return failf("candidate %d won the campaign while %d other candidate(s) lead", i, n-1)
		}
		mu.Lock()
		turn := len(order)
		order = append(order, i)
		if !released.IsZero() {
			handover = append(handover, time.Since(released))
		}
		mu.Unlock()
		return lead(i, turn, m, e, view, obs, value, func() {
			leaders.Add(-1)
			mu.Lock()
			released = time.Now()
			mu.Unlock()
		})
	})
	if err != nil {
		return "", err
	}
	if len(order) != electionCandidates {
		return "", failf("%d candidates led, want %d", len(order), electionCandidates)
	}
	// Every leader and every proclaimed value, in the order leadership passed.
	var want []string
	for _, i := range order {
		want = append(want, fmt.Sprintf("candidate-%d", i), fmt.Sprintf("candidate-%d proclaimed", i))
	}
	got := obs.snapshot()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		return "", failf("the observer saw %q, want %q", got, want)
	}
	ctx, cancel := opCtx()
	defer cancel()
	if resp, err := view.Leader(ctx); !errors.Is(err, concurrency.ErrElectionNoLeader) {
		return "", failf("Leader() after every candidate left returned %v, %v; want %v", kvValue(resp), err, concurrency.ErrElectionNoLeader)
	}
	sort.Slice(handover, func(a, b int) bool { return handover[a] < handover[b] })
	return fmt.Sprintf("%d candidates led one at a time in order %v, observer saw all %d values in order, handovers (resign, session close) within %v",
		electionCandidates, order, len(got), handover[len(handover)-1].Round(time.Millisecond)), nil
}

// lead is one leader's turn: Leader() names it, the observer sees its value, it
// proclaims a new one, the observer sees that, then it steps down (the second leader by
// closing its session, the others by Resign) and can no longer Proclaim.
func lead(i, turn int, m *member, e, view *concurrency.Election, obs *observed, value string, stepDown func()) error {
	ctx, cancel := opCtx()
	defer cancel()
	resp, err := view.Leader(ctx)
	if err != nil {
		return fmt.Errorf("Leader() while candidate %d leads: %w", i, err)
	}
	if string(resp.Kvs[0].Value) != value || string(resp.Kvs[0].Key) != e.Key() {
		return failf("Leader() while candidate %d leads names %s=%q, want %s=%q", i, resp.Kvs[0].Key, resp.Kvs[0].Value, e.Key(), value)
	}
	if err := obs.waitFor(value); err != nil {
		return err
	}
	proclaimed := value + " proclaimed"
	if err := e.Proclaim(ctx, proclaimed); err != nil {
		return fmt.Errorf("candidate %d Proclaim: %w", i, err)
	}
	if err := obs.waitFor(proclaimed); err != nil {
		return err
	}
	if resp, err := view.Leader(ctx); err != nil || string(resp.Kvs[0].Value) != proclaimed {
		return failf("Leader() after candidate %d proclaimed returned %v, %v; want %q", i, kvValue(resp), err, proclaimed)
	}
	stepDown()
	if turn == 1 {
		// Closing the session revokes its lease, which deletes the leader key.
		if err := m.session.Close(); err != nil {
			return fmt.Errorf("candidate %d closing its session: %w", i, err)
		}
		m.session = nil
		return nil
	}
	if err := e.Resign(ctx); err != nil {
		return fmt.Errorf("candidate %d Resign: %w", i, err)
	}
	if err := e.Proclaim(ctx, "after resigning"); !errors.Is(err, concurrency.ErrElectionNotLeader) {
		return failf("candidate %d Proclaim after Resign returned %v, want %v", i, err, concurrency.ErrElectionNotLeader)
	}
	return nil
}

// ---------------------------------------------------------------------------------------
// stm

const (
	stmAccounts  = 5
	stmBalance   = 100
	stmWorkers   = 4
	stmTransfers = 15
	stmAuditors  = 2
)

// Each STM client talks to one member (members in turn). Serializable and snapshot
// isolation read every key after the first at the first read's revision, serializably:
// a client balanced over several members may ask a member that has not applied that
// revision yet and get "required revision is a future revision", on etcd itself as well
// (etcd-io/etcd#11963, #12561).
func checkSTM(pfx string) (string, error) {
	clients := make([]*clientv3.Client, 0, stmWorkers+stmAuditors)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for i := 0; i < stmWorkers+stmAuditors; i++ {
		c, err := newClientTo([]string{endpoints[i%len(endpoints)]})
		if err != nil {
			return "", err
		}
		clients = append(clients, c)
	}
	account := func(i int) string { return fmt.Sprintf("%sacct/%02d", pfx, i) }
	keys := make([]string, stmAccounts)
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	for i := range keys {
		keys[i] = account(i)
		if _, err := clients[0].Put(ctx, keys[i], strconv.Itoa(stmBalance)); err != nil {
			return "", fmt.Errorf("writing the opening balances: %w", err)
		}
	}
	total := stmAccounts * stmBalance
	isolations := []struct {
		name string
		iso  concurrency.Isolation
	}{
		{"serializable", concurrency.Serializable},
		{"repeatable-read", concurrency.RepeatableReads},
		{"serializable-snapshot", concurrency.SerializableSnapshot},
	}

	var (
		errs     firstErr
		wg       sync.WaitGroup
		attempts atomic.Int64
		moved    atomic.Int64
		audits   atomic.Int64
		done     = make(chan struct{})
	)
	for w := 0; w < stmWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 1))
			iso := isolations[w%len(isolations)]
			for t := 0; t < stmTransfers && !errs.failed.Load(); t++ {
				from := rng.Intn(stmAccounts)
				to := (from + 1 + rng.Intn(stmAccounts-1)) % stmAccounts
				want := 1 + rng.Intn(30)
				_, err := concurrency.NewSTM(clients[w], func(s concurrency.STM) error {
					attempts.Add(1)
					a, err := balance(s, keys[from])
					if err != nil {
						return err
					}
					b, err := balance(s, keys[to])
					if err != nil {
						return err
					}
					amount := min(a, want)
					s.Put(keys[from], strconv.Itoa(a-amount))
					s.Put(keys[to], strconv.Itoa(b+amount))
					return nil
				}, concurrency.WithIsolation(iso.iso), concurrency.WithAbortContext(ctx))
				if err != nil {
					errs.set(fmt.Errorf("%s transfer by worker %d: %w", iso.name, w, err))
					return
				}
				moved.Add(1)
			}
		}(w)
	}
	var auditWg sync.WaitGroup
	for a := 0; a < stmAuditors; a++ {
		auditWg.Add(1)
		go func(c *clientv3.Client) {
			defer auditWg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				sum := 0
				_, err := concurrency.NewSTM(c, func(s concurrency.STM) error {
					sum = 0
					for _, k := range keys {
						v, err := balance(s, k)
						if err != nil {
							return err
						}
						sum += v
					}
					return nil
				}, concurrency.WithIsolation(concurrency.SerializableSnapshot), concurrency.WithAbortContext(ctx))
				if err != nil {
					errs.set(fmt.Errorf("audit: %w", err))
					return
				}
				if sum != total {
					errs.set(failf("an audit in one snapshot while transfers ran summed to %d, want %d", sum, total))
					return
				}
				audits.Add(1)
				time.Sleep(20 * time.Millisecond)
			}
		}(clients[stmWorkers+a])
	}
	wg.Wait()
	close(done)
	auditWg.Wait()
	if errs.err != nil {
		return "", errs.err
	}
	resp, err := clients[0].Get(ctx, pfx+"acct/", clientv3.WithPrefix())
	if err != nil {
		return "", err
	}
	sum, balances := 0, []string{}
	for _, kv := range resp.Kvs {
		n, err := strconv.Atoi(string(kv.Value))
		if err != nil || n < 0 {
			return "", failf("account %s holds %q", kv.Key, kv.Value)
		}
		sum += n
		balances = append(balances, string(kv.Value))
	}
	if len(resp.Kvs) != stmAccounts || sum != total {
		return "", failf("after the transfers %d accounts hold %d in all (%v), want %d holding %d", len(resp.Kvs), sum, balances, stmAccounts, total)
	}
	return fmt.Sprintf("%d transfers (%d attempts: %d retried on conflict) under serializable, repeatable-read and snapshot isolation, total %d kept; %d snapshot audits all summed to %d; balances %v",
		moved.Load(), attempts.Load(), attempts.Load()-moved.Load(), total, audits.Load(), total, balances), nil
}

func balance(s concurrency.STM, key string) (int, error) {
	v := s.Get(key)
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, failf("account %s holds %q", key, v)
	}
	return n, nil
}

// ---------------------------------------------------------------------------------------
// expiry

// shortTTL is the TTL of the session that stops its keep-alives (servers may raise it to
// their minimum, about 2 s for etcd's default election timeout).
const shortTTL = 2

// revokedTTL is the TTL of the session whose lease is revoked: short, so that its next
// keep-alive (every TTL/3) finds the lease gone and the session reports done soon.
const revokedTTL = 3

func checkExpiry(pfx string) (string, error) {
	revokedIn, err := lostByRevoke(pfx + "revoke")
	if err != nil {
		return "", err
	}
	expiredIn, err := lostByExpiry(pfx + "expire")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("revoked lease: lock lost (key gone, fenced write refused, session done) and taken over in %v; keep-alives stopped (TTL %ds): taken over in %v",
		revokedIn.Round(time.Millisecond), shortTTL, expiredIn.Round(time.Millisecond)), nil
}

// contest is a lock held by one session with another session waiting for it.
type contest struct {
	holder, next  *member
	held, waiting *concurrency.Mutex
	acquired      <-chan error // the waiting Lock's result
	heldRevision  int64        // the holder's fencing token
}

// newContest: a session with TTL holderTTL takes the lock, a second one waits for it
// (and must still be waiting half a second later).
func newContest(lockPfx string, holderTTL int) (*contest, error) {
	holder, err := newMember(holderTTL)
	if err != nil {
		return nil, err
	}
	next, err := newMember(sessionTTL)
	if err != nil {
		holder.close()
		return nil, err
	}
	c := &contest{holder: holder, next: next, held: concurrency.NewMutex(holder.session, lockPfx)}
	if err := c.start(lockPfx); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *contest) start(lockPfx string) error {
	ctx, cancel := opCtx()
	defer cancel()
	if err := c.held.Lock(ctx); err != nil {
		return fmt.Errorf("holder Lock: %w", err)
	}
	rev, err := createRevision(c.holder.client, c.held.Key())
	if err != nil {
		return err
	}
	c.heldRevision = rev
	c.waiting = concurrency.NewMutex(c.next.session, lockPfx)
	acquired := make(chan error, 1)
	c.acquired = acquired
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
		defer cancel()
		acquired <- c.waiting.Lock(ctx)
	}()
	select {
	case e := <-c.acquired:
		return failf("a second session acquired the lock while the first held it (Lock returned %v)", e)
	case <-time.After(500 * time.Millisecond):
		return nil
	}
}

// takenOver waits for the waiting session to acquire after what happened to the holder
// at since; it checks that the new holder's fencing token is above the old one's.
func (c *contest) takenOver(what string, since time.Time) (time.Duration, error) {
	select {
	case err := <-c.acquired:
		if err != nil {
			return 0, fmt.Errorf("the waiting session's Lock after %s: %w", what, err)
		}
	case <-time.After(opTimeout):
		return 0, failf("the waiting session did not acquire within %s of %s", opTimeout, what)
	}
	took := time.Since(since)
	rev, err := createRevision(c.next.client, c.waiting.Key())
	if err != nil {
		return 0, err
	}
	if rev <= c.heldRevision {
		return 0, failf("the new holder's fencing token %d is not above the old holder's %d", rev, c.heldRevision)
	}
	ctx, cancel := opCtx()
	defer cancel()
	return took, c.waiting.Unlock(ctx)
}

func (c *contest) close() {
	c.holder.close()
	c.next.close()
}

// lostByRevoke: revoking the holder's lease loses it the lock: its key is gone, a write
// fenced by its IsOwner() is refused, its session reports done, the waiter acquires.
func lostByRevoke(lockPfx string) (time.Duration, error) {
	c, err := newContest(lockPfx, revokedTTL)
	if err != nil {
		return 0, err
	}
	defer c.close()
	holder := c.holder
	ctx, cancel := opCtx()
	defer cancel()
	revoked := time.Now()
	if _, err := holder.client.Revoke(ctx, holder.session.Lease()); err != nil {
		return 0, fmt.Errorf("Revoke: %w", err)
	}
	took, err := c.takenOver("the holder's lease being revoked", revoked)
	if err != nil {
		return 0, err
	}
	if rev, err := createRevision(holder.client, c.held.Key()); err != nil || rev != 0 {
		return 0, failf("the revoked holder's lock key %s still exists (create revision %d, %v)", c.held.Key(), rev, err)
	}
	fenced, err := holder.client.Txn(ctx).If(c.held.IsOwner()).Then(clientv3.OpPut(lockPfx+"-fenced", "stale holder")).Commit()
	if err != nil {
		return 0, fmt.Errorf("fenced write of the revoked holder: %w", err)
	}
	if fenced.Succeeded {
		return 0, failf("a write fenced by the revoked holder's IsOwner() succeeded")
	}
	select {
	case <-holder.session.Done():
	case <-time.After(opTimeout):
		return 0, failf("the revoked session did not report Done within %s", opTimeout)
	}
	holder.session = nil // its lease is gone; nothing to revoke
	return took, nil
}

// lostByExpiry: a holder whose keep-alives stop loses the lock once its TTL runs out, and
// its lease reads as expired.
func lostByExpiry(lockPfx string) (time.Duration, error) {
	c, err := newContest(lockPfx, shortTTL)
	if err != nil {
		return 0, err
	}
	defer c.close()
	stopped := time.Now()
	c.holder.session.Orphan() // keep-alives stop; the lease runs out on the server
	took, err := c.takenOver(fmt.Sprintf("the holder's keep-alives stopping (TTL %ds)", shortTTL), stopped)
	if err != nil {
		return 0, err
	}
	ctx, cancel := opCtx()
	defer cancel()
	ttl, err := c.holder.client.TimeToLive(ctx, c.holder.session.Lease())
	if err != nil {
		return 0, fmt.Errorf("TimeToLive of the expired lease: %w", err)
	}
	if ttl.TTL != -1 {
		return 0, failf("TimeToLive of the expired lease says TTL %d, want -1 (expired)", ttl.TTL)
	}
	c.holder.session = nil
	return took, nil
}
