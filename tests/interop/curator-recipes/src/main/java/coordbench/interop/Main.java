package coordbench.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.CloseableUtils;

/**
 * Apache Curator's recipes against a ZooKeeper-protocol server, checking what each recipe
 * guarantees rather than only that its calls return (see each check's class):
 *
 * <pre>
 *   mutex      InterProcessMutex (LockChecks)
 *   semaphore  InterProcessSemaphoreV2 (LockChecks)
 *   latch      LeaderLatch (LeaderChecks)
 *   selector   LeaderSelector (LeaderChecks)
 *   barrier    DistributedDoubleBarrier (BarrierChecks)
 *   cache      CuratorCache (WatchChecks)
 *   watcher    PersistentWatcher, recursive and not (WatchChecks)
 * </pre>
 *
 * Every wait is bounded. Success prints one "ok" line per check and "PASS"; the first
 * failure prints one line "FAIL &lt;check&gt;: &lt;reason&gt;" on stderr and exits 1.
 *
 * <p>Usage: {@code java -jar curator-recipes.jar CONNECT_STRING [check,check,...]}
 */
public final class Main {
    /** Bound on one wait: an acquisition, an election, an event. */
    static final long OP_SECONDS = 20;
    /** Bound on one whole check. */
    static final long CHECK_SECONDS = 120;
    static final int SESSION_TIMEOUT_MS = 10_000;
    static final int CONNECTION_TIMEOUT_MS = 5_000;

    private static String connectString;
    private static final List<CuratorFramework> OPEN = new ArrayList<>();

    private Main() {}

    /** A check's one-line reason. */
    static final class Failure extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Failure(String reason) {
            super(reason);
        }
    }

    interface Check {
        String run(String base) throws Exception;
    }

    static Failure fail(String format, Object... args) {
        return new Failure(String.format(format, args));
    }

    public static void main(String[] args) {
        if (args.length < 1 || args.length > 2) {
            System.err.println("FAIL usage: java -jar curator-recipes.jar CONNECT_STRING [checks]");
            System.exit(2);
        }
        connectString = args[0];
        Map<String, Check> all = new LinkedHashMap<>();
        all.put("mutex", LockChecks::mutex);
        all.put("semaphore", LockChecks::semaphore);
        all.put("latch", LeaderChecks::latch);
        all.put("selector", LeaderChecks::selector);
        all.put("barrier", BarrierChecks::barrier);
        all.put("cache", WatchChecks::cache);
        all.put("watcher", WatchChecks::persistentWatcher);
        List<String> names = args.length == 2 ? List.of(args[1].split(",")) : new ArrayList<>(all.keySet());
        String root = "/coordbench-interop/" + ProcessHandle.current().pid() + "-" + System.currentTimeMillis();
        long start = System.nanoTime();
        for (String name : names) {
            Check check = all.get(name);
            if (check == null) {
                System.err.println("FAIL usage: unknown check " + name);
                System.exit(2);
            }
            long began = System.nanoTime();
            Thread watchdog = watchdog(name);
            String detail;
            try {
                detail = check.run(root + "/" + name);
            } catch (Throwable t) {
                System.err.println("FAIL " + name + ": " + oneLine(reason(t)));
                System.err.flush();
                Runtime.getRuntime().halt(1);
                return;
            } finally {
                watchdog.interrupt();
                closeAll();
            }
            System.out.printf("ok %s (%.1fs): %s%n", name, seconds(began), detail);
            System.out.flush();
        }
        System.out.printf("PASS (%.1fs)%n", seconds(start));
        System.out.flush();
        // Curator and ZooKeeper leave non-daemon threads behind.
        System.exit(0);
    }

    private static double seconds(long sinceNanos) {
        return (System.nanoTime() - sinceNanos) / 1e9;
    }

    /** A check that hangs despite its bounded waits still ends the program. */
    private static Thread watchdog(String name) {
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(TimeUnit.SECONDS.toMillis(CHECK_SECONDS));
            } catch (InterruptedException done) {
                return;
            }
            System.err.println("FAIL " + name + ": did not finish within " + CHECK_SECONDS + "s");
            System.err.flush();
            Runtime.getRuntime().halt(1);
        }, "watchdog");
        t.setDaemon(true);
        t.start();
        return t;
    }

    private static String reason(Throwable t) {
        if (t instanceof Failure) {
            return t.getMessage();
        }
        Throwable cause = t;
        while ((cause instanceof java.util.concurrent.ExecutionException) && cause.getCause() != null) {
            cause = cause.getCause();
        }
        if (cause instanceof Failure) {
            return cause.getMessage();
        }
        StackTraceElement at = cause.getStackTrace().length > 0 ? cause.getStackTrace()[0] : null;
        return cause + (at == null ? "" : " at " + at);
    }

    static String oneLine(String s) {
        return String.join(" ", String.valueOf(s).trim().split("\\s+"));
    }

    /** A started client with its own session, connected within the bound. */
    static CuratorFramework client(String name) throws InterruptedException {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(connectString)
                .sessionTimeoutMs(SESSION_TIMEOUT_MS)
                .connectionTimeoutMs(CONNECTION_TIMEOUT_MS)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                // Nodes a recipe creates without data of its own (lock and lease nodes)
                // carry the client's name, so a check can tell whose node it is.
                .defaultData(bytes(name))
                .build();
        synchronized (OPEN) {
            OPEN.add(c);
        }
        c.start();
        if (!c.blockUntilConnected((int) OP_SECONDS, TimeUnit.SECONDS)) {
            throw fail("client %s did not connect to %s within %ds", name, connectString, OP_SECONDS);
        }
        return c;
    }

    static List<CuratorFramework> clients(String prefix, int n) throws InterruptedException {
        List<CuratorFramework> cs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            cs.add(client(prefix + "-" + i));
        }
        return cs;
    }

    private static void closeAll() {
        synchronized (OPEN) {
            for (CuratorFramework c : OPEN) {
                CloseableUtils.closeQuietly(c);
            }
            OPEN.clear();
        }
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] b) {
        return b == null ? "(null)" : new String(b, StandardCharsets.UTF_8);
    }

    /** What one client does in {@link #eachClient}. */
    interface PerClient<T> {
        T run(int id, CuratorFramework c) throws Exception;
    }

    /**
     * Runs {@code body} for every client, each on a thread of its own; returns the results
     * in client order, or rethrows the first failure.
     */
    static <T> List<T> eachClient(List<CuratorFramework> cs, PerClient<T> body) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(cs.size());
        try {
            List<Future<T>> futures = new ArrayList<>();
            for (int i = 0; i < cs.size(); i++) {
                final int id = i;
                final CuratorFramework c = cs.get(i);
                futures.add(pool.submit(() -> body.run(id, c)));
            }
            List<T> results = new ArrayList<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(CHECK_SECONDS);
            for (Future<T> f : futures) {
                try {
                    results.add(f.get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS));
                } catch (TimeoutException e) {
                    throw fail("a participant did not finish within %ds", CHECK_SECONDS);
                }
            }
            return results;
        } finally {
            pool.shutdownNow();
        }
    }

    /** Waits until {@code done} holds, polling, for at most {@link #OP_SECONDS}. */
    static void await(String what, BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(OP_SECONDS);
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw fail("%s: not within %ds", what, OP_SECONDS);
            }
            Thread.sleep(10);
        }
    }
}
