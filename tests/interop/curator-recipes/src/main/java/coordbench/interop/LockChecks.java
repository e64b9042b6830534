package coordbench.interop;

import static coordbench.interop.Main.OP_SECONDS;
import static coordbench.interop.Main.bytes;
import static coordbench.interop.Main.clients;
import static coordbench.interop.Main.eachClient;
import static coordbench.interop.Main.fail;
import static coordbench.interop.Main.text;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;

/** InterProcessMutex and InterProcessSemaphoreV2. */
final class LockChecks {
    private LockChecks() {}

    static final int MUTEX_CLIENTS = 5;
    static final int MUTEX_ROUNDS = 6;

    /**
     * Several clients, each with its own session, take turns in a critical section: no two
     * are ever inside at once; the holder's lock node is the oldest participant and carries
     * its name; the lock nodes' sequence numbers (fencing tokens) strictly increase in the
     * order of acquisition; a read-modify-write counter loses no update; the holder can
     * acquire again (reentrancy) and keeps the lock until it released as often; a second
     * client cannot acquire meanwhile; every lock node is gone at the end.
     */
    static String mutex(String base) throws Exception {
        List<CuratorFramework> cs = clients("mutex", MUTEX_CLIENTS);
        String lockPath = base + "/lock";
        String counterPath = base + "/counter";
        cs.get(0).create().creatingParentsIfNeeded().forPath(counterPath, bytes("0"));
        Occupancy section = new Occupancy(1);
        List<Long> tokens = Collections.synchronizedList(new ArrayList<>());
        eachClient(cs, (id, c) -> {
            InterProcessMutex mutex = new InterProcessMutex(c, lockPath);
            for (int r = 0; r < MUTEX_ROUNDS; r++) {
                mutexRound(id, c, mutex, lockPath, counterPath, section, tokens);
            }
            return null;
        });
        if (section.overruns() > 0) {
            throw fail("%d times a client entered the critical section while another was inside", section.overruns());
        }
        int want = MUTEX_CLIENTS * MUTEX_ROUNDS;
        if (tokens.size() != want) {
            throw fail("%d acquisitions recorded, want %d", tokens.size(), want);
        }
        for (int i = 1; i < tokens.size(); i++) {
            if (tokens.get(i) <= tokens.get(i - 1)) {
                throw fail("fencing tokens (lock node sequence numbers) not increasing at acquisition %d: %d after %d (all: %s)",
                        i, tokens.get(i), tokens.get(i - 1), tokens);
            }
        }
        String counter = text(cs.get(0).getData().forPath(counterPath));
        if (!counter.equals(String.valueOf(want))) {
            throw fail("counter incremented under the lock is %s, want %d: an update was lost", counter, want);
        }
        Collection<String> left = new InterProcessMutex(cs.get(0), lockPath).getParticipantNodes();
        if (!left.isEmpty()) {
            throw fail("lock nodes left after every holder released: %s", left);
        }
        reentrancy(cs.get(0), cs.get(1), lockPath);
        return String.format("%d clients x %d rounds, no overlap, holder's node always the oldest, fencing tokens %d..%d strictly increasing, guarded counter %d, reentrant (held until released twice, another client refused meanwhile)",
                MUTEX_CLIENTS, MUTEX_ROUNDS, tokens.get(0), tokens.get(tokens.size() - 1), want);
    }

    private static void mutexRound(int id, CuratorFramework c, InterProcessMutex mutex, String lockPath,
            String counterPath, Occupancy section, List<Long> tokens) throws Exception {
        if (!mutex.acquire(OP_SECONDS, TimeUnit.SECONDS)) {
            throw fail("client %d could not acquire the lock within %ds", id, OP_SECONDS);
        }
        section.enter();
        List<String> participants = new ArrayList<>(mutex.getParticipantNodes());
        if (participants.isEmpty()) {
            throw fail("client %d holds the lock but the lock has no participant nodes", id);
        }
        String oldest = participants.get(0);
        String owner = text(c.getData().forPath(oldest));
        if (!owner.equals("mutex-" + id)) {
            throw fail("client mutex-%d holds the lock but the oldest lock node %s belongs to %s", id, oldest, owner);
        }
        tokens.add(sequence(oldest));
        // Read, pause, write without a version: only mutual exclusion keeps this from
        // losing an update.
        int n = Integer.parseInt(text(c.getData().forPath(counterPath)));
        Thread.sleep(2 + ThreadLocalRandom.current().nextInt(8));
        c.setData().forPath(counterPath, bytes(String.valueOf(n + 1)));
        section.leave();
        mutex.release();
        if (mutex.isAcquiredInThisProcess()) {
            throw fail("client %d released the lock once but it still counts as held", id);
        }
    }

    /** The sequence number ZooKeeper appended to a sequential node's name. */
    static long sequence(String path) {
        return Long.parseLong(path.substring(path.length() - 10));
    }

    /** Acquired twice, held until released twice; another client is refused meanwhile. */
    private static void reentrancy(CuratorFramework a, CuratorFramework b, String lockPath) throws Exception {
        InterProcessMutex first = new InterProcessMutex(a, lockPath);
        InterProcessMutex second = new InterProcessMutex(b, lockPath);
        if (!first.acquire(OP_SECONDS, TimeUnit.SECONDS)) {
            throw fail("the lock is free but acquire timed out");
        }
        if (!first.acquire(1, TimeUnit.SECONDS)) {
            throw fail("the holder could not acquire its own lock again (reentrancy)");
        }
        if (first.getParticipantNodes().size() != 1) {
            throw fail("a reentrant acquire created another lock node: %s", first.getParticipantNodes());
        }
        first.release();
        if (!first.isAcquiredInThisProcess()) {
            throw fail("acquired twice, released once, but the lock no longer counts as held");
        }
        if (second.acquire(300, TimeUnit.MILLISECONDS)) {
            throw fail("another client acquired the lock while its holder (acquired twice) had released once");
        }
        first.release();
        if (!second.acquire(OP_SECONDS, TimeUnit.SECONDS)) {
            throw fail("the lock released twice by its holder was not acquired by the waiting client within %ds", OP_SECONDS);
        }
        second.release();
    }

    static final int SEMAPHORE_LEASES = 2;
    static final int SEMAPHORE_CLIENTS = 5;
    static final int SEMAPHORE_ROUNDS = 4;

    /**
     * Never more than N leases held: clients with their own sessions contend for the leases
     * and count the holders; with N held a further acquire times out, and returning one
     * lets it through.
     */
    static String semaphore(String base) throws Exception {
        List<CuratorFramework> cs = clients("semaphore", SEMAPHORE_CLIENTS);
        String path = base + "/semaphore";
        Occupancy held = new Occupancy(SEMAPHORE_LEASES);
        eachClient(cs, (id, c) -> {
            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(c, path, SEMAPHORE_LEASES);
            for (int r = 0; r < SEMAPHORE_ROUNDS; r++) {
                Lease lease = sem.acquire(OP_SECONDS, TimeUnit.SECONDS);
                if (lease == null) {
                    throw fail("client %d got no lease within %ds", id, OP_SECONDS);
                }
                held.enter();
                Thread.sleep(10 + ThreadLocalRandom.current().nextInt(20));
                held.leave();
                sem.returnLease(lease);
            }
            return null;
        });
        if (held.overruns() > 0) {
            throw fail("%d times more than %d leases were held at once (most: %d)", held.overruns(), SEMAPHORE_LEASES, held.most());
        }
        // With every lease held, one more acquire waits; a returned lease lets it in.
        InterProcessSemaphoreV2 a = new InterProcessSemaphoreV2(cs.get(0), path, SEMAPHORE_LEASES);
        InterProcessSemaphoreV2 b = new InterProcessSemaphoreV2(cs.get(1), path, SEMAPHORE_LEASES);
        InterProcessSemaphoreV2 c = new InterProcessSemaphoreV2(cs.get(2), path, SEMAPHORE_LEASES);
        Lease la = a.acquire(OP_SECONDS, TimeUnit.SECONDS);
        Lease lb = b.acquire(OP_SECONDS, TimeUnit.SECONDS);
        if (la == null || lb == null) {
            throw fail("two clients could not take the %d free leases", SEMAPHORE_LEASES);
        }
        Lease extra = c.acquire(500, TimeUnit.MILLISECONDS);
        if (extra != null) {
            throw fail("a third lease was granted while %d of %d were held", SEMAPHORE_LEASES, SEMAPHORE_LEASES);
        }
        a.returnLease(la);
        Lease lc = c.acquire(OP_SECONDS, TimeUnit.SECONDS);
        if (lc == null) {
            throw fail("a returned lease was not granted to the waiting client within %ds", OP_SECONDS);
        }
        b.returnLease(lb);
        c.returnLease(lc);
        return String.format("%d clients x %d rounds on %d leases: at most %d held at once; with all held a further acquire waited until one was returned",
                SEMAPHORE_CLIENTS, SEMAPHORE_ROUNDS, SEMAPHORE_LEASES, held.most());
    }
}
